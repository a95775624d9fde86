"""MariaDB-side faults: a flood of idle clients."""

from __future__ import annotations

import random
from typing import Any

from fixos.models import Outcome
from injector.base import Fault
from injector.edit import install_script, spawn_with_pid
from shells.base import Shell

_REPORT_JOB = """#!/bin/sh
# Nightly sales report: one connection per region, left open "for speed".
for region in $(seq 1 {n}); do
    mariadb -u reports -p'{password}' shop -e 'SELECT SLEEP(86400)' >/dev/null 2>&1 &
done
wait
"""


class ConnectionsExhausted(Fault):
    """A batch job holds every MariaDB connection with idle sessions: the app gets
    "Too many connections" (root still gets the one extra admin slot)."""

    type = "connections_exhausted"

    def prepare(self, shell: Shell, rng: random.Random) -> None:
        self.name = rng.choice(["sales-report", "nightly-export", "bi-extract"])
        self.password = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(10))
        limit = int(shell.run("mariadb -N -e 'SELECT @@max_connections'").output.strip())
        body = _REPORT_JOB.format(n=limit + 5, password=self.password)
        shell.run(
            "mariadb -e \"CREATE USER IF NOT EXISTS 'reports'@'localhost' "
            f"IDENTIFIED BY '{self.password}'; GRANT SELECT ON shop.* TO 'reports'@'localhost'\""
        )
        install_script(shell, f"/usr/local/bin/{self.name}", body)
        self.limit = limit

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        self.pid = spawn_with_pid(shell, f"/usr/local/bin/{self.name}", None)
        return {"name": self.name, "pid": self.pid}

    def confirm(self, shell: Shell) -> Outcome:
        used = shell.run("mariadb -N -e \"SHOW STATUS LIKE 'Threads_connected'\"").output.split()
        count = int(used[-1]) if used and used[-1].isdigit() else 0
        ok = count >= self.limit
        return Outcome(ok, f"{count} connections of {self.limit} in use, held by {self.name}")

    def revert(self, shell: Shell) -> None:
        shell.run(f"pkill -f /usr/local/bin/{self.name}; pkill -u root -x mariadb", timeout=10)
