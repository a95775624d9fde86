"""A php-fpm pool misconfigured the way people do it: pool semantics, not syntax.

Every variant is a real failure of bookworm's php-fpm 8.2 (tried on the image):
some stop the daemon at start (its log says which setting), the others leave it
running while the site cannot use it (a socket nginx does not know, a socket
nginx may not open, scripts the pool refuses to run).
"""

from __future__ import annotations

import random
import re
import shlex
from collections.abc import Mapping
from typing import Any, NamedTuple

from ..core.errors import InvalidEpisode
from ..core.models import Outcome
from ..core.words import word
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams
from .limits import sed_regex, sed_text
from .service import stop_service

POOL = "/etc/php/8.2/fpm/pool.d/www.conf"
SPLIT_POOL = "/etc/php/8.2/fpm/pool.d/shop.conf"
"""on an app-role host the site is served by this pool (TCP 9000), www.conf stays the local socket one"""
FPM_LOG = "/var/log/php8.2-fpm.log"
FPM = "php8.2-fpm"


class PoolVariant(NamedTuple):
    settings: tuple[tuple[str, tuple[str, ...]], ...]
    """(setting, values to draw one from), written into the pool file in this order"""
    starts: bool
    """whether php-fpm still starts (the site fails at run time) or refuses to"""
    log: str
    """at start: a fragment of php-fpm's own error line ({value} is the first setting's value)"""


VARIANTS: dict[str, PoolVariant] = {
    "max_children_zero": PoolVariant(
        (("pm.max_children", ("0",)),), False, "pm.max_children must be a positive value"
    ),
    "static_no_children": PoolVariant(
        (("pm", ("static",)), ("pm.max_children", ("0",))),
        False,
        "pm.max_children must be a positive value",
    ),
    "spare_servers": PoolVariant(
        (("pm", ("dynamic",)), ("pm.start_servers", ("5", "6", "8"))),
        False,
        "must not be less than pm.min_spare_servers",
    ),
    "unknown_user": PoolVariant(
        (("user", ("www", "php-fpm", "webapp", "www-date")),), False, "cannot get uid for user '{value}'"
    ),
    "listen_elsewhere": PoolVariant(
        (("listen", ("/run/php/php-fpm.sock", "/run/php/www.sock", "/run/php/php8-fpm.sock")),), True, ""
    ),
    "listen_localhost": PoolVariant((("listen", ("127.0.0.1:9000",)),), True, ""),
    "socket_owner": PoolVariant((("listen.owner", ("root",)), ("listen.group", ("root",))), True, ""),
    "limit_extensions": PoolVariant((("security.limit_extensions", (".php5", ".phtml", ".php7")),), True, ""),
}
_TCP_ONLY = {"listen_localhost"}
_SOCKET_ONLY = {"listen_elsewhere", "socket_owner"}


# Like edit.replace_command, but whole lines only: "pm = ondemand" also sits inside comments.
_REPLACE_LINE = (
    "perl -0777 -i -pe '$n += s/^\\Q$ENV{FIXOS_OLD}\\E$/$ENV{FIXOS_NEW}/m; END { exit($n ? 0 : 3) }'"
)


def replace_line(pool: str, old: str, new: str) -> str:
    """A shell command replacing the first line of ``pool`` that is exactly ``old``."""
    return f"FIXOS_OLD={shlex.quote(old)} FIXOS_NEW={shlex.quote(new)} {_REPLACE_LINE} {pool}"


def find_line(shell: Shell, pool: str, key: str) -> str:
    """The line setting ``key``: the live one, else the commented-out example."""
    key = re.escape(key)
    return shell.run(f"grep -m1 -E '^{key} = ' {pool} || grep -m1 -E '^;{key} = ' {pool}").output.strip()


def read_setting(shell: Shell, pool: str, key: str) -> str | None:
    """The value the pool file really gives ``key`` (its last uncommented line), or None."""
    out = shell.run(f"grep -E '^{re.escape(key)} *=' {pool} | tail -n 1", timeout=10).output.strip()
    return out.split("=", 1)[1].strip() if "=" in out else None


@FAULTS.register
class FpmPoolBroken(Fault):
    """The www pool's settings are wrong (which ones comes from the seed) and php-fpm
    was restarted: it refuses to start, or runs where the site cannot use it."""

    type = "fpm_pool_broken"
    records = ("variant", "file", "settings", "broken", "original", "lines", "undo")

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The pool's lines put back and php-fpm restarted, as the fault restarted it."""
        return f"sed -i {word(seeded['undo'])} {word(seeded['file'])}\nservice {FPM} restart"

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.variant = ""
        """the variant drawn from the seed"""
        self.lines: list[tuple[str, str]] = []
        """(original line, broken line) in the order inject wrote them"""
        self.listen = ""
        """where the healthy pool listened (a socket path, or a TCP port on an app host)"""
        self.pool = POOL
        """the pool file that serves the site"""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        if shell.run(f"[ -f {SPLIT_POOL} ]").ok:
            self.pool = SPLIT_POOL
        self.listen = read_setting(shell, self.pool, "listen") or ""
        if not self.listen:
            raise InvalidEpisode(f"{self.pool} has no listen line")
        tcp = not self.listen.startswith("/")
        names = [n for n in VARIANTS if n not in (_SOCKET_ONLY if tcp else _TCP_ONLY)]
        self.variant = rng.choice(names)
        variant = VARIANTS[self.variant]
        drawn = [(key, rng.choice(values)) for key, values in variant.settings]
        stop_service(shell, FPM)
        for key, value in drawn:
            found = find_line(shell, self.pool, key)
            if not found:
                raise InvalidEpisode(f"{self.pool} has no {key} line")
            broken = f"{key} = {value}"
            result = shell.run(replace_line(self.pool, found, broken), timeout=10)
            if result.exit_code != 0:
                raise InvalidEpisode(f"cannot edit {self.pool}: {result.output.strip()}")
            self.lines.append((found, broken))
        shell.run(f"service {FPM} start", timeout=30)
        return {
            "variant": self.variant,
            "file": self.pool,
            "settings": {key: value for key, value in drawn},
            "broken": "\n".join(b for _, b in self.lines),
            "original": "\n".join(o for o, _ in self.lines),
            "lines": [{"original": o, "broken": b} for o, b in self.lines],
            "undo": ";".join(f"s|^{sed_regex(b)}$|{sed_text(o)}|" for o, b in self.lines),
        }

    def confirm(self, shell: Shell) -> Outcome:
        variant = VARIANTS[self.variant]
        key, value = self.lines[0][1].split(" = ", 1)
        effective = read_setting(shell, self.pool, key)
        if effective != value:
            return Outcome(False, f"{self.pool} gives {key} = {effective}, not {value}")
        running = shell.run(f"service {FPM} status", timeout=10).exit_code == 0
        if not variant.starts:
            fragment = variant.log.format(value=value)
            logged = shell.run(f"grep -F {shlex.quote(fragment)} {FPM_LOG} | tail -n 1").output.strip()
            ok = not running and bool(logged)
            return Outcome(ok, f"php-fpm {'running' if running else 'down'}; {FPM_LOG}: {logged[:160]}")
        if not running:
            return Outcome(False, f"php-fpm is down, but {self.variant} leaves it running")
        if self.variant == "listen_elsewhere":
            ok = shell.run(f"[ -S {value} ] && [ ! -e {self.listen} ]").ok
            return Outcome(ok, f"php-fpm listens on {value}; {self.listen} (the site's) is gone")
        if self.variant == "listen_localhost":
            ok = shell.run("ss -ltnH | grep -q '127.0.0.1:9000 '").ok
            return Outcome(ok, "php-fpm listens on 127.0.0.1:9000 only")
        if self.variant == "socket_owner":
            owner = shell.run(f"stat -c %U:%G {self.listen}").output.strip()
            return Outcome(owner == "root:root", f"{self.listen} belongs to {owner}")
        return Outcome(True, f"php-fpm runs with {key} = {value}")

    def revert(self, shell: Shell) -> None:
        stop_service(shell, FPM)
        for original, broken in reversed(self.lines):
            shell.run(replace_line(self.pool, broken, original), timeout=10)
        shell.run(f"service {FPM} start", timeout=30)
