"""A cron job that keeps breaking the site again.

cron (started at boot) rereads /etc/cron.d and its spool each minute, so a
job installed there first fires within a minute; cron's granularity is a
minute, so the job's script, as such scripts often do, repeats its work every
few seconds until the minute is up ("* * * * *" plus a loop). Its first round
is started at inject (as whoever installed the job ran it by hand to try it),
so the symptom is there at once; cron then starts a round every minute.
Fixing the damage alone therefore lasts seconds; the job, its running round
and the damage all have to go.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Mapping
from typing import Any, Literal

from ..core.errors import InvalidEpisode
from ..core.models import Outcome
from ..core.words import word
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams
from .conflicts import DOWN, OWN, Claim

# What the job does each round, and the shell test (true when broken) for it.
DAMAGE = {
    "nginx": ("service nginx stop >/dev/null 2>&1", "! pgrep -x nginx >/dev/null"),
    "php-fpm": ("service php8.2-fpm stop >/dev/null 2>&1", "! pgrep -f '^php-fpm: master' >/dev/null"),
    "app_dir": (
        "chown root:root /var/www/app && chmod 0700 /var/www/app",
        '[ "$(stat -c %U:%a /var/www/app)" = root:700 ]',
    ),
}
REPAIRS = {
    "nginx": "service nginx start",
    "php-fpm": "service php8.2-fpm start",
    "app_dir": "chown www-data:www-data /var/www/app && chmod 0755 /var/www/app",
}
# Job names and script places an operator might have used (none is an innocent's).
NAMES = ["shop-cachewarm", "fpm-recycle", "nginx-tune", "deploy-sync", "sess-gc"]
SCRIPT_DIRS = ["/usr/local/sbin", "/opt/shopops/bin", "/usr/lib/shop-tools", "/home/deploy/bin"]


@FAULTS.register
class CronRebreaker(Fault):
    """A job run by cron every minute (in /etc/cron.d or root's crontab) whose script,
    every few seconds, breaks ``target``: stops nginx or php-fpm, or closes the
    app's directory to php-fpm's user; where and under what name comes from the seed."""

    type = "cron_rebreaker"
    returns = True
    records = ("damage", "job", "script", "repair")

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The job removed, the round already under way stopped (it runs until its minute
        is up, and a stop it began may still be going on), then the damage repaired."""
        job = seeded["job"]
        drop = "crontab -r" if job == "/var/spool/cron/crontabs/root" else f"rm -f {word(job)}"
        stop = f'pkill -f "^/bin/sh (-c )?"{word(seeded["script"])} || true; sleep 2'
        return f"{drop}\n{stop}; {stop}\nsh -c {word(seeded['repair'])}"

    class Params(FaultParams):
        target: Literal["nginx", "php-fpm", "app_dir"]
        interval: int = 3
        """seconds between two rounds of the job's script within its minute"""

    @classmethod
    def claims(cls, params: Params) -> list[Claim]:
        if params.target == "app_dir":
            return [Claim("perm:/var/www/app", OWN, "keeps taking the app's directory from php-fpm's user")]
        service = "nginx" if params.target == "nginx" else "php8.2-fpm"
        return [Claim(f"service:{service}", DOWN, f"keeps stopping {service} from cron")]

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.damage = ""
        self.job = ""
        self.script = ""
        """what inject changed, drawn from the seed"""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        self.damage = self.params.target
        name = rng.choice(NAMES)
        self.script = f"{rng.choice(SCRIPT_DIRS)}/{name}"
        place = rng.choice(["cron.d", "crontab"])
        rounds = max(1, 55 // self.params.interval)
        action, broken = DAMAGE[self.damage]
        body = (
            "#!/bin/sh\n# keep the box in the state ops expects (see OPS-512)\n"
            # cron's PATH lacks the sbin directories `service` lives in
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
            f"for i in $(seq {rounds}); do\n  {action}\n  sleep {self.params.interval}\ndone\n"
        )
        if place == "cron.d":
            self.job = f"/etc/cron.d/{name}"
            install = f"printf '%s\\n' {shlex.quote(f'* * * * * root {self.script}')} > {self.job}"
        else:
            self.job = "/var/spool/cron/crontabs/root"
            install = f"(crontab -l 2>/dev/null; echo {shlex.quote(f'* * * * * {self.script}')}) | crontab -"
        done = shell.run(
            f"mkdir -p {shlex.quote(self.script.rsplit('/', 1)[0])} && "
            f"printf '%s' {shlex.quote(body)} > {self.script} && chmod 0755 {self.script} && {install} && "
            # its first round started by hand, as whoever installed it tried it
            f"{{ setsid {self.script} </dev/null >/dev/null 2>&1 & }} && "
            f"for _ in $(seq 150); do {broken} && break; sleep 0.1; done",
            timeout=30,
        )
        if not done.ok:
            raise InvalidEpisode(f"cannot install the cron job: {done.output.strip()}")
        return {
            "damage": self.damage,
            "job": self.job,
            "script": self.script,
            "repair": REPAIRS[self.damage],
        }

    def confirm(self, shell: Shell) -> Outcome:
        # Installed: cron runs and its table names the script; effective: the damage is there.
        _, broken = DAMAGE[self.damage]
        script = shlex.quote(self.script)
        out = shell.run(
            f"pgrep -x cron >/dev/null && echo cron; grep -lF {script} {self.job} 2>/dev/null; "
            f"test -x {script} && echo script; {broken} && echo broken",
            timeout=15,
        ).output.split()
        ok = out[:1] == ["cron"] and self.job in out and "script" in out and "broken" in out
        seen = " ".join(out)
        return Outcome(ok, f"{self.job} runs {self.script} every minute ({self.damage}); seen: {seen}")

    def revert(self, shell: Shell) -> None:
        if not self.job:
            return
        drop = (
            f"rm -f {self.job}"
            if self.job.startswith("/etc/cron.d/")
            else f"crontab -l | grep -vF {shlex.quote(self.script)} | crontab -"
        )
        shell.run(
            f"{drop}; pkill -f {shlex.quote('^/bin/sh ' + self.script)}; rm -f {self.script}; "
            + REPAIRS[self.damage],
            timeout=30,
        )
