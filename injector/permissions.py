"""Ownership and modes broken the way a careless `chown -R` or `chmod` breaks them."""

from __future__ import annotations

import random
from typing import Any, Literal

from fixos.core.models import Outcome
from fixos.injector.base import FAULTS, Fault, FaultParams
from fixos.injector.config import MARIADB_TRY_START
from fixos.injector.service import stop_service
from fixos.shells.base import Shell

VARIANTS = {
    "web_root": [
        "chown root:root /var/www/shop && chmod 700 /var/www/shop",
        "chown -R root:root /var/www/shop && chmod 600 /var/www/shop/index.html /var/www/shop/style.css",
        "chmod 711 /var/www && chmod 750 /var/www/shop && chown root:root /var/www/shop",
    ],
    "datadir": [
        "chown -R root:root /var/lib/mysql",
        "chown root:root /var/lib/mysql && chmod 700 /var/lib/mysql",
        "chown -R root:root /var/lib/mysql/shop /var/lib/mysql/ibdata1",
    ],
}


@FAULTS.register
class PermissionsBroken(Fault):
    """The web root or MariaDB's data directory got the wrong owner or mode (seeded)."""

    type = "permissions_broken"

    class Params(FaultParams):
        target: Literal["web_root", "datadir"]

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.command = ""
        """the chown/chmod inject ran, drawn from the seed"""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        self.command = rng.choice(VARIANTS[self.params.target])
        if self.params.target == "datadir":
            stop_service(shell, "mariadb")
            shell.run(self.command)
            shell.run(MARIADB_TRY_START, timeout=30)
        else:
            shell.run(self.command)
        return {"command": self.command}

    def confirm(self, shell: Shell) -> Outcome:
        if self.params.target == "datadir":
            status = shell.run("service mariadb status")
            ok = status.exit_code != 0
            return Outcome(ok, f"after `{self.command}`: mariadb status exit {status.exit_code}")
        code = shell.run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1/").output.strip()
        return Outcome(code == "403", f"after `{self.command}`: GET / -> {code}")

    def revert(self, shell: Shell) -> None:
        shell.run(
            "chown -R www-data:www-data /var/www/shop && chmod 755 /var/www /var/www/shop && "
            "chmod 644 /var/www/shop/* && chown -R mysql:mysql /var/lib/mysql && chmod 755 /var/lib/mysql",
        )
        if self.params.target == "datadir":
            shell.run("service mariadb start", timeout=60)
