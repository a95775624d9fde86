"""MariaDB-side faults: a flood of idle clients."""

from __future__ import annotations

import random
import shlex
from collections.abc import Mapping
from typing import Any

from ..core.models import Outcome
from ..core.words import word
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams, PidWord, plain_pid
from .edit import install_script, spawn_with_pid
from .process import culprit_path

# One PHP process, so the sessions it keeps are idle ones: the server ends them at
# once when it stops. (A client per region left in SELECT SLEEP made every shutdown
# wait 2-16 s, and while the server was down 42 shell loops retrying it spent 3-7
# CPU-s of the host's.) Checked twice a second, so a session killed is back in 0.5 s.
_REPORT_JOB = """#!/usr/bin/php
<?php
// Nightly sales report: one connection per region, opened once and kept "for speed";
// each is checked twice a second and opened again when it is lost.
mysqli_report(MYSQLI_REPORT_OFF);
$regions = array_fill(1, @N@, null);
while (true) {
    foreach ($regions as $region => $link) {
        if (!$link || !@$link->query('DO 0')) {
            $regions[$region] = @mysqli_connect('localhost', 'reports', '@PASSWORD@', 'shop') ?: null;
        }
    }
    usleep(500000);
}
"""


_FULL = (
    "SELECT (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
    "WHERE VARIABLE_NAME = 'THREADS_CONNECTED') > @@max_connections"
)


@FAULTS.register
class ConnectionsExhausted(Fault):
    """A batch job holds every MariaDB connection with idle sessions: the app gets
    "Too many connections" (root still gets the one extra admin slot)."""

    type = "connections_exhausted"
    records = ("name", "pid", "path")

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The job stopped (its sessions end with it), then any session left killed: a
        client cut off mid-handshake briefly holds even the spare slot kept for root, so
        that is tried again (20 times at most)."""
        return (
            f'pkill -f "^/usr/bin/php "{word(seeded["path"])}\n'
            'n=0; until mariadb -e "KILL USER reports"; '
            "do n=$((n + 1)); [ $n -lt 20 ] || exit 1; sleep 0.3; done"
        )

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.name = ""
        """the batch job's program, where it is installed and its database password, drawn from the seed"""
        self.path = ""
        self.password = ""
        self.limit = 0
        """MariaDB's max_connections, read by prepare"""
        self.pid: int | None = None
        """where inject started the job"""

    def prepare(self, shell: Shell, rng: random.Random) -> None:
        self.name = rng.choice(["sales-report", "nightly-export", "bi-extract"])
        self.path = culprit_path(rng, self.name)
        self.password = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(10))
        limit = int(shell.run("mariadb -N -e 'SELECT @@max_connections'").output.strip())
        body = _REPORT_JOB.replace("@N@", str(limit + 2)).replace("@PASSWORD@", self.password)
        shell.run(
            "mariadb -e \"CREATE USER IF NOT EXISTS 'reports'@'localhost' "
            f"IDENTIFIED BY '{self.password}'; GRANT SELECT ON shop.* TO 'reports'@'localhost'\""
        )
        install_script(shell, self.path, body)
        self.limit = limit

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        self.pid = spawn_with_pid(shell, self.path, None)
        return {"name": self.name, "pid": self.pid, "path": self.path}

    def symptom(self, seeded: Mapping[str, Any], pid: PidWord = plain_pid) -> str:
        # Every ordinary slot taken, so any ordinary client (the app included) gets
        # "Too many connections": root, in the spare slot MariaDB keeps for it,
        # sees one more thread than max_connections. The job connects a moment after it starts.
        return f'[ "$(mariadb -N -e {shlex.quote(_FULL)})" = 1 ]'

    def confirm(self, shell: Shell) -> Outcome:
        ok = shell.run(self.symptom({"name": self.name, "pid": self.pid}), timeout=15).ok
        used = shell.run("mariadb -N -e \"SHOW STATUS LIKE 'Threads_connected'\"").output.split()
        return Outcome(
            ok, f"{used[-1] if used else '?'} of {self.limit} connections in use, held by {self.name}"
        )

    def revert(self, shell: Shell) -> None:
        shell.run(f"pkill -f '^/usr/bin/php {self.path}'; mariadb -e 'KILL USER reports'", timeout=15)
