"""File-descriptor and connection limits set so low that a service fails under normal use.

Tried on the image before keeping: php-fpm's pool ``rlimit_files = 5`` lets the
master run while every worker fails to open the script ("Unable to open primary
script ... (Too many open files)", a 404 through nginx); the global
``rlimit_files`` of 6-10 stops php-fpm at start ("... Too many open files (24)").
nginx's own file limit (``ULIMIT`` in /etc/default/nginx, ``worker_rlimit_nofile``)
never failed a page deterministically: a worker holding other workers' channel
sockets has low descriptors free, so whichever worker took the request decided.
Its connection limit does: ``worker_connections`` two above its listening
sockets leaves a worker its listeners, its channel and the client, so every PHP
page fails with "N worker_connections are not enough while connecting to
upstream" and static pages still work.
"""

from __future__ import annotations

import random
import re
import shlex
from collections.abc import Mapping
from typing import Any, Literal

from ..core.errors import InvalidEpisode
from ..core.models import Outcome
from ..core.words import word
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams
from .service import stop_service

NGINX_MAIN = "/etc/nginx/nginx.conf"
FPM_MAIN = "/etc/php/8.2/fpm/php-fpm.conf"
FPM_POOL = "/etc/php/8.2/fpm/pool.d/www.conf"
SPLIT_POOL = "/etc/php/8.2/fpm/pool.d/shop.conf"
FPM_LOG = "/var/log/php8.2-fpm.log"

# Why someone lowered it, as the comment they left above the line.
REASONS = [
    "tuned for the small instance, see OPS-214",
    "keep memory down on the shared box",
    "per the hardening checklist",
    "copied from the staging server",
]


def _perl(old: str, new: str, path: str) -> str:
    """Replace the first line that is exactly ``old`` (a regex of whole lines) with ``new``."""
    return (
        f"FIXOS_OLD={shlex.quote(old)} FIXOS_NEW={shlex.quote(new)} "
        "perl -0777 -i -pe '$n += s/^$ENV{FIXOS_OLD}$/$ENV{FIXOS_NEW}/m; END { exit($n ? 0 : 3) }' "
        + shlex.quote(path)
    )


@FAULTS.register
class FdLimit(Fault):
    """A descriptor or connection limit of ``service`` set far too low (which one, and
    how low, comes from the seed), the service restarted with it."""

    type = "fd_limit"
    records = ("variant", "file", "limit", "original", "broken", "undo")

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The limit's line put back and the service restarted, as the fault restarted it."""
        service = "nginx" if self.params.service == "nginx" else "php8.2-fpm"
        return f"sed -i {word(seeded['undo'])} {word(seeded['file'])}\nservice {service} restart"

    class Params(FaultParams):
        service: Literal["nginx", "php-fpm"]

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.file = ""
        self.original = ""
        self.broken = ""
        self.variant = ""
        self.limit = 0
        """what inject changed, drawn from the seed"""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        reason = rng.choice(REASONS)
        if self.params.service == "nginx":
            self.variant, self.file, limit = "worker_connections", NGINX_MAIN, _listeners(shell) + 2
            pattern, self.broken = (
                r"[[:blank:]]*worker_connections [0-9]+;",
                f"\t# {reason}\n\tworker_connections {limit};",
            )
        else:
            self.variant = rng.choice(["pool_rlimit_files", "master_rlimit_files"])
            if self.variant == "pool_rlimit_files":
                # The pool file has no rlimit_files example: the line goes under its user.
                self.file, limit = FPM_POOL, 5
                if shell.run(f"[ -f {SPLIT_POOL} ]").ok:  # an app host serves the site from this pool
                    self.file = SPLIT_POOL
                pattern = r"group = www-data"
                self.broken = f"group = www-data\n; {reason}\nrlimit_files = {limit}"
            else:
                self.file, limit = FPM_MAIN, rng.choice([6, 8, 10])
                pattern, self.broken = r";rlimit_files = 1024", f"; {reason}\nrlimit_files = {limit}"
        found = shell.run(f"grep -m1 -E {shlex.quote('^' + pattern + '$')} {self.file}").output.rstrip("\n")
        if not found:
            raise InvalidEpisode(f"{self.file} has no line matching {pattern}")
        self.original, self.limit = found, limit
        service = "nginx" if self.params.service == "nginx" else "php8.2-fpm"
        stop_service(shell, service)
        edit = shell.run(_perl(pattern, self.broken, self.file), timeout=10)
        if edit.exit_code != 0:
            raise InvalidEpisode(f"cannot edit {self.file}: {edit.output.strip()}")
        shell.run(f"service {service} start", timeout=30)
        return {
            "variant": self.variant,
            "file": self.file,
            "limit": limit,
            "original": self.original,
            "broken": self.broken,
            "undo": undo_sed(self.original, self.broken),
        }

    def confirm(self, shell: Shell) -> Outcome:
        limit = self.limit
        if self.variant == "worker_connections":
            shell.run("curl -s -o /dev/null -m 5 http://localhost/status", timeout=10)
            seen = shell.run(
                f"nginx -T 2>/dev/null | grep -c '^\\s*worker_connections {limit};' ; "
                "grep -c 'worker_connections are not enough' /var/log/nginx/*error.log | grep -v ':0$'"
            ).output.split()
            ok = bool(seen) and seen[0] == "1" and len(seen) > 1
            return Outcome(ok, f"nginx runs with worker_connections {limit}; its log: {' '.join(seen[1:])}")
        effective = shell.run(f"grep -E '^rlimit_files *=' {self.file} | tail -n 1").output.strip()
        if effective != f"rlimit_files = {limit}":
            return Outcome(False, f"{self.file} gives {effective or 'no rlimit_files'}")
        running = shell.run("service php8.2-fpm status", timeout=10).exit_code == 0
        if self.variant == "pool_rlimit_files":
            # Workers are started on demand: the limit each would get is the pool's.
            return Outcome(running, f"php-fpm {'runs' if running else 'is down'}; {self.file}: {effective}")
        logged = shell.run(f"grep -F 'Too many open files (24)' {FPM_LOG} | tail -n 1").output.strip()
        ok = not running and bool(logged)
        return Outcome(ok, f"php-fpm {'runs' if running else 'is down'}; {FPM_LOG}: {logged[:160]}")

    def revert(self, shell: Shell) -> None:
        if not self.file:
            return
        service = "nginx" if self.params.service == "nginx" else "php8.2-fpm"
        stop_service(shell, service)
        shell.run(_perl(_literal(self.broken), self.original, self.file), timeout=10)
        shell.run(f"service {service} start", timeout=30)


def _listeners(shell: Shell) -> int:
    """How many listening sockets each nginx worker holds (one per listen address).

    A worker needs a connection for each, one for its channel to the master, one
    per client and one per upstream: with two more than its listeners it serves
    static files and no PHP page. nginx -t itself counts them, on a copy of the config.
    """
    copy = "/etc/nginx/.fixos-count.conf"  # beside the original: its includes are relative
    out = shell.run(
        f"sed -E 's/worker_connections [0-9]+;/worker_connections 1;/' {NGINX_MAIN} > {copy}; "
        f"nginx -t -c {copy} 2>&1; rm -f {copy}"
    ).output
    match = re.search(r"not enough for (\d+) listening sockets", out)
    if not match:
        raise InvalidEpisode(f"cannot count nginx's listening sockets: {out.strip()[-200:]}")
    return int(match.group(1))


def sed_regex(line: str) -> str:
    """``line`` as a GNU sed basic regex matching only itself (``|`` delimits)."""
    return "".join("\\" + c if c in ".[]*^$\\|" else c for c in line).replace("\t", "\\t")


def sed_text(line: str) -> str:
    """``line`` as a GNU sed replacement standing for itself (``|`` delimits)."""
    return "".join("\\" + c if c in "\\&|" else c for c in line).replace("\t", "\\t")


def undo_sed(original: str, broken: str) -> str:
    """A sed script turning the ``broken`` lines back into the ``original`` one: the
    lines inject added go, the changed one gets its old text (for the oracle)."""
    kept = original.split("\n")
    added = [line for line in broken.split("\n") if line not in kept]
    *extra, changed = added
    commands = [f"\\|^{sed_regex(line)}$|d" for line in extra]
    if original in broken.split("\n"):
        commands.append(f"\\|^{sed_regex(changed)}$|d")
    else:
        commands.append(f"s|^{sed_regex(changed)}$|{sed_text(original)}|")
    return ";".join(commands)


def _literal(text: str) -> str:
    """``text`` as a regex matching only itself (perl's quotemeta, line by line)."""
    return "\n".join(
        "".join("\\" + c if not c.isalnum() and c != " " else c for c in line) for line in text.split("\n")
    )
