"""Cross-service failures a user sees as a broken site.

``app_db``: the order-status app cannot use its database (credentials,
grants, socket path, host). ``web_app``: nginx cannot reach the PHP app
(php-fpm down, its socket moved, its socket's permissions).
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from ..core.errors import InvalidEpisode
from ..core.models import Outcome
from ..core.words import word
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams
from .edit import replace_command

APP_INI = "/etc/shop/app.ini"
FPM_POOL = "/etc/php/8.2/fpm/pool.d/www.conf"
PASSWORD = "tidewater-4821"


class Variant(NamedTuple):
    name: str
    breaks: str
    repairs: str


def _sql(statement: str) -> str:
    return f'mariadb -e "{statement}"'


def _ini(old: str, new: str) -> tuple[str, str]:
    return replace_command(APP_INI, old, new), replace_command(APP_INI, new, old)


def _pool(old: str, new: str) -> tuple[str, str]:
    b, r = replace_command(FPM_POOL, old, new), replace_command(FPM_POOL, new, old)
    return f"{b} && service php8.2-fpm restart", f"{r} && service php8.2-fpm restart"


def _variants(rng: random.Random) -> dict[str, list[Variant]]:
    # The drawn password and host differ per seed, so no answer can be memorised.
    password = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz23456789") for _ in range(12))
    host = rng.choice(["db.internal", "mysql01.tidewater.lan", "orders-db"])
    return {
        "app_db": [
            Variant(
                "password rotated in the database only",
                _sql(f"ALTER USER 'shop'@'localhost' IDENTIFIED BY '{password}'"),
                _sql(f"ALTER USER 'shop'@'localhost' IDENTIFIED BY '{PASSWORD}'"),
            ),
            Variant(
                "grants revoked",
                _sql("REVOKE SELECT ON shop.* FROM 'shop'@'localhost'"),
                _sql("GRANT SELECT ON shop.* TO 'shop'@'localhost'"),
            ),
            Variant("socket path wrong", *_ini("mysqld/mysqld.sock", "mysqld/mariadb.sock")),
            Variant("database host wrong", *_ini("host = localhost", f"host = {host}")),
        ],
        "web_app": [
            Variant("php-fpm stopped", "service php8.2-fpm stop", "service php8.2-fpm start"),
            Variant(
                "php-fpm socket moved",
                *_pool("listen = /run/php/php8.2-fpm.sock", "listen = /run/php/php-fpm.sock"),
            ),
            Variant(
                "php-fpm socket not readable by nginx",
                *_pool("listen.owner = www-data", "listen.owner = root\nlisten.mode = 0600"),
            ),
        ],
    }


_PASSWORD_MATCHES = (
    "SELECT JSON_VALUE(Priv, '$.authentication_string') = PASSWORD('" + PASSWORD + "') "
    "FROM mysql.global_priv WHERE User = 'shop' AND Host = 'localhost'"
)
_GRANTS = "SHOW GRANTS FOR 'shop'@'localhost'"

_PROBES = {
    # Connect with the app's own settings, as status.php does.
    "app_db": (
        "ini() { awk -F' *= *' -v k=\"$1\" '$1 == k { print $2 }' " + APP_INI + "; }; "
        'mariadb --connect-timeout=3 -h "$(ini host)" -S "$(ini socket)" -u "$(ini user)" '
        '-p"$(ini password)" "$(ini name)" -e "SELECT COUNT(*) FROM orders" 2>&1'
    ),
    # nginx (www-data) must be able to open php-fpm's socket.
    "web_app": (
        "su -s /bin/sh www-data -c 'test -S /run/php/php8.2-fpm.sock && "
        "test -w /run/php/php8.2-fpm.sock' && service php8.2-fpm status"
    ),
}


def _sql_says(statement: str) -> str:
    return f"mariadb -N -e {shlex.quote(statement)}"


# A shell test per variant that succeeds while that very break is in place,
# read from the database (as root) or the config file, never through the page:
# another fault (MariaDB's connections all taken, nginx down) may fail the page too.
_IN_PLACE = {
    "password rotated in the database only": f'[ "$({_sql_says(_PASSWORD_MATCHES)})" = 0 ]',
    "grants revoked": f"g=$({_sql_says(_GRANTS)}) && ! printf '%s' \"$g\" | grep -q 'SELECT.*shop'",
    "socket path wrong": f"grep -q 'mysqld/mariadb.sock' {APP_INI}",
    "database host wrong": f"grep -q '^host = ' {APP_INI} && ! grep -qx 'host = localhost' {APP_INI}",
    "php-fpm stopped": "! service php8.2-fpm status >/dev/null 2>&1",
    "php-fpm socket moved": f"grep -qx 'listen = /run/php/php-fpm.sock' {FPM_POOL}",
    "php-fpm socket not readable by nginx": f"grep -qx 'listen.owner = root' {FPM_POOL}",
}


@FAULTS.register
class DependencyBroken(Fault):
    """The site's /status page fails because one of its dependencies is broken."""

    type = "dependency_broken"
    records = ("variant", "repair")

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The link repaired by the command the fault recorded (``repair``)."""
        return f"sh -c {word(seeded['repair'])}"

    class Params(FaultParams):
        link: Literal["app_db", "web_app"]
        path: str = "/status"

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.variant: Variant | None = None
        """how inject broke the link, drawn from the seed"""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        self.variant = rng.choice(_variants(rng)[self.params.link])
        result = shell.run(self.variant.breaks, timeout=60)
        if result.exit_code != 0:
            raise InvalidEpisode(f"cannot break {self.params.link}: {result.output.strip()[-200:]}")
        return {"variant": self.variant.name, "repair": self.variant.repairs}

    def confirm(self, shell: Shell) -> Outcome:
        # Exercise the link itself, as the app or nginx would, so the symptom is
        # proven even while another fault keeps the whole site down.
        result = shell.run(_PROBES[self.params.link], timeout=15)
        variant = self.variant.name if self.variant else "not broken yet"
        if result.exit_code == 0:
            return Outcome(False, f"{self.params.link} link still works ({variant})")
        if self.variant is None or not shell.run(_IN_PLACE[self.variant.name], timeout=15).ok:
            return Outcome(False, f"{variant}: not in place (the link fails for another reason)")
        last = result.output.strip().splitlines()[-1:] or [""]
        return Outcome(True, f"{variant}: {last[0][:160]}")

    def revert(self, shell: Shell) -> None:
        if self.variant is not None:
            shell.run(self.variant.repairs, timeout=60)
