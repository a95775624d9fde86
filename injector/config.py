"""A service's configuration broken by one plausible human edit, then the service restarted."""

from __future__ import annotations

import random
import shlex
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from ..core.models import Outcome
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams
from .edit import replace_command, replace_in_file
from .service import stop_service

NGINX_SITE = "/etc/nginx/sites-available/shop"
NGINX_MAIN = "/etc/nginx/nginx.conf"
MARIADB_FIXOS = "/etc/mysql/mariadb.conf.d/60-fixos.cnf"
MARIADB_SERVER = "/etc/mysql/mariadb.conf.d/50-server.cnf"


class Edit(NamedTuple):
    file: str
    original: str
    broken: str
    what: str


EDITS: dict[str, list[Edit]] = {
    "nginx": [
        Edit(NGINX_SITE, "    root /var/www/shop;", "    root /var/www/shop", "missing semicolon"),
        Edit(NGINX_SITE, "try_files $uri", "try_file $uri", "misspelt directive"),
        Edit(NGINX_SITE, "listen 80 default_server;", "listen 80 default_sever;", "bad parameter"),
        Edit(NGINX_SITE, "include fastcgi_params;", "include fastcgi_param;", "missing include"),
        Edit(NGINX_MAIN, "worker_connections 768;", "worker_connection 768;", "misspelt directive"),
    ],
    "mariadb": [
        Edit(MARIADB_FIXOS, "key_buffer_size = 1M", "key_bufer_size = 1M", "unknown variable"),
        Edit(MARIADB_FIXOS, "max_connections = 40", "max_connections = 4O", "bad number"),
        Edit(
            MARIADB_FIXOS,
            "innodb_log_file_size = 4M",
            "innodb_logfile_size = 4M",
            "unknown variable",
        ),
    ],
}

# Starting the server the way the init script does, minus its 30 s wait for a
# server that will never come up: the failure lands in the error log as usual.
# Done only once mysqld_safe has logged *this* start's end (the stop before it
# logged the same line) and none of its processes lives: the agent's view of the
# host, and the steady state recorded from it, must not hold a server on its way out.
_ERROR_LOG = "/var/log/mysql/error.log"
MARIADB_TRY_START = (
    f"n=$(wc -l < {_ERROR_LOG} 2>/dev/null || echo 0); ( mysqld_safe >/dev/null 2>&1 & ); "
    "for i in $(seq 1 100); do "
    f"tail -n +$((n + 1)) {_ERROR_LOG} 2>/dev/null | grep -q 'mysqld_safe mysqld from pid file' && break; "
    "sleep 0.1; done; "
    "for i in $(seq 1 100); do pgrep -x 'mariadbd|mysqld_safe' >/dev/null || break; sleep 0.05; done"
)


@FAULTS.register
class ConfigBroken(Fault):
    """One line of the service's config is wrong (which one comes from the seed);
    the service was restarted and failed, leaving the daemon's own error in its log."""

    type = "config_broken"
    records = ("file", "original", "broken", "what")

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The line put back (perl exits 3 when the broken line is not there); the
        service is left for the solution to start, after what else keeps it down."""
        return replace_command(seeded["file"], seeded["broken"], seeded["original"])

    class Params(FaultParams):
        service: Literal["nginx", "mariadb"]

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.edit: Edit | None = None
        """the line inject broke, drawn from the seed"""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        edit = self.edit = rng.choice(EDITS[self.params.service])
        if self.params.service == "nginx":
            # Debian's `restart` refuses a bad config and keeps the old nginx
            # running; a stop, the edit, then a start is how a site goes down.
            stop_service(shell, "nginx")
            replace_in_file(shell, edit.file, edit.original, edit.broken)
            shell.run("service nginx start", timeout=30)
        else:
            stop_service(shell, "mariadb")
            replace_in_file(shell, edit.file, edit.original, edit.broken)
            shell.run(MARIADB_TRY_START, timeout=30)
        return edit._asdict()

    def confirm(self, shell: Shell) -> Outcome:
        service = self.params.service
        status = shell.run(f"service {service} status", timeout=10)
        if status.exit_code == 0:
            return Outcome(False, f"{service} still running")
        # The edit itself must be in place: whatever else is broken, the
        # daemon's config test fails on this file's injected line.
        if self.edit is not None:
            edited = shell.run(f"grep -qF -- {shlex.quote(self.edit.broken)} {shlex.quote(self.edit.file)}")
            if not edited.ok:
                return Outcome(False, f"{self.edit.file} no longer holds {self.edit.broken.strip()!r}")
        test = "nginx -t" if service == "nginx" else "mariadbd --help --verbose >/dev/null"
        check = shell.run(test, timeout=20)
        if check.exit_code == 0:
            return Outcome(False, f"{service}'s configuration still passes `{test}`")
        last = check.output.strip().splitlines()[:1] or [""]
        return Outcome(True, f"{service} down; `{test}`: {last[0][:160]}")

    def revert(self, shell: Shell) -> None:
        if self.edit is None:
            return
        shell.run(replace_command(self.edit.file, self.edit.broken, self.edit.original), timeout=10)
        shell.run(f"service {self.params.service} start", timeout=60)
