"""Ownership and modes broken the way a careless `chown -R` or `chmod` breaks them."""

from __future__ import annotations

import random
import shlex
from collections.abc import Mapping
from typing import Any, Literal

from ..core.models import Outcome
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams
from .config import MARIADB_TRY_START
from .service import stop_service

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

REPAIRS = {
    "web_root": (
        "chown -R www-data:www-data /var/www/shop\n"
        "chmod 755 /var/www /var/www/shop\n"
        "chmod 644 /var/www/shop/index.html /var/www/shop/style.css"
    ),
    "datadir": "chown -R mysql:mysql /var/lib/mysql\nchmod 755 /var/lib/mysql",
}
"""owners and modes as the image has them, whichever variant took them away."""

# What the daemon's user must be able to do on a healthy host; every variant takes one away.
_ACCESS = {
    "web_root": ("www-data", "test -r /var/www/shop/index.html && test -r /var/www/shop/style.css"),
    "datadir": (
        "mysql",
        "test -w /var/lib/mysql && test -x /var/lib/mysql/shop && test -w /var/lib/mysql/ibdata1",
    ),
}


def _access_test(target: str) -> str:
    """A shell test that succeeds while the daemon's user still has its access (no PAM, no login)."""
    user, test = _ACCESS[target]
    return f"setpriv --reuid={user} --regid={user} --clear-groups sh -c {shlex.quote(test)}"


@FAULTS.register
class PermissionsBroken(Fault):
    """The web root or MariaDB's data directory got the wrong owner or mode (seeded)."""

    type = "permissions_broken"
    records = ("command",)

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """Owners and modes as the image has them; MariaDB, which the fault left down, is
        the solution's to start."""
        return REPAIRS[self.params.target]

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
        # Proven as the daemon's own user, not through a page: another fault may
        # keep nginx down (GET / -> 000), and this one is there all the same.
        user, _ = _ACCESS[self.params.target]
        denied = not shell.run(_access_test(self.params.target), timeout=10).ok
        if self.params.target == "datadir":
            status = shell.run("service mariadb status")
            ok = denied and status.exit_code != 0
            return Outcome(
                ok, f"after `{self.command}`: {user} denied {denied}; mariadb status exit {status.exit_code}"
            )
        return Outcome(denied, f"after `{self.command}`: {user} can read the home page: {not denied}")

    def revert(self, shell: Shell) -> None:
        shell.run(
            "chown -R www-data:www-data /var/www/shop && chmod 755 /var/www /var/www/shop && "
            "chmod 644 /var/www/shop/* && chown -R mysql:mysql /var/lib/mysql && chmod 755 /var/lib/mysql",
        )
        if self.params.target == "datadir":
            shell.run("service mariadb start", timeout=60)
