"""A MyISAM table the status page reads, marked crashed as an unclean stop leaves it.

Tried on the image (MariaDB 10.11) before keeping: with the default
``myisam_recover_options = BACKUP,QUICK`` the server repairs a crashed MyISAM
table itself the first time it opens it (``Recovering table``), so a crash
alone heals on the next query. Operators turn that off (auto-repair locks a big
table at open and may drop rows); with it OFF, a table whose key-file header
carries the crashed flag (byte 26 of the .MYI state, ``STATE_CRASHED``), and
whose index blocks were lost, answers every query with ERROR 145 "Table
'./shop/shipments' is marked as crashed and should be repaired", and
``REPAIR TABLE`` (or ``myisamchk -r`` with the server down) rebuilds the index
from the data file, keeping every row.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Mapping
from typing import Any

from ..core.errors import InvalidEpisode
from ..core.models import Outcome
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams
from .conflicts import OWN, UP, Claim
from .service import stop_service

DATADIR = "/var/lib/mysql"
CRASHED = "is marked as crashed and should be repaired"

# Where an operator put the setting that switches auto-repair off, and why.
RECOVER_OFF = [
    ("/etc/mysql/mariadb.conf.d/60-tuning.cnf", "auto-repair locked the shipments table for minutes"),
    ("/etc/mysql/conf.d/shop.cnf", "no silent repairs: we check tables by hand (OPS-377)"),
    ("/etc/mysql/mariadb.conf.d/99-local.cnf", "faster restarts after the crash of the 12th"),
]


@FAULTS.register
class TableCrashed(Fault):
    """``table`` (a MyISAM table of the shop) marked crashed with its index blocks
    lost while the server was down, and the server's automatic repair off."""

    type = "table_crashed"
    records = ("table", "conf", "variant", "index")

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The table repaired from its data file, every row kept; the option file stays."""
        return f"mariadb -e {shlex.quote('REPAIR TABLE ' + str(seeded['table']))}"

    class Params(FaultParams):
        table: str = "shop.shipments"

    @classmethod
    def claims(cls, params: Params) -> list[Claim]:
        return [
            Claim("service:mariadb", UP, "proves the crash by the server's own answer"),
            Claim(f"table:{params.table}", OWN, "crashes the table's key file"),
        ]

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.conf = ""
        self.variant = ""
        """what inject changed, drawn from the seed"""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        schema, _, name = self.params.table.partition(".")
        index = f"{DATADIR}/{schema}/{name}.MYI"
        if not shell.run(f"test -s {shlex.quote(index)}").ok:
            raise InvalidEpisode(f"{self.params.table} is not a MyISAM table here ({index} missing)")
        self.conf, reason = rng.choice(RECOVER_OFF)
        # flag: only the crashed flag; index: the key blocks after the header lost as well
        self.variant = rng.choice(["flag", "index"])
        stop_service(shell, "mariadb")
        lost = (
            f"dd if=/dev/zero of={shlex.quote(index)} bs=1024 seek=1 count=1 conv=notrunc 2>/dev/null; "
            if self.variant == "index"
            else ""
        )
        done = shell.run(
            f"mkdir -p {shlex.quote(self.conf.rsplit('/', 1)[0])} && "
            f"printf '# %s\\n[mariadbd]\\nmyisam_recover_options = OFF\\n' {shlex.quote(reason)} "
            f"> {shlex.quote(self.conf)} && "
            # open_count 1 and state changed|crashed: what a kill -9 mid-write leaves
            f"printf '\\000\\001\\003' | dd of={shlex.quote(index)} bs=1 seek=24 conv=notrunc 2>/dev/null && "
            f"{lost}true",
            timeout=15,
        )
        if not done.ok:
            raise InvalidEpisode(f"cannot crash {self.params.table}: {done.output.strip()}")
        shell.run("service mariadb start", timeout=60)
        return {"table": self.params.table, "conf": self.conf, "variant": self.variant, "index": index}

    def confirm(self, shell: Shell) -> Outcome:
        # The server's own answer for this table (by its primary key, so the index is read).
        out = shell.run(
            "mariadb -N -B -e "
            + shlex.quote(f"SELECT COUNT(*) FROM {self.params.table} WHERE order_id > 0")
            + " 2>&1",
            timeout=15,
        ).output.strip()
        return Outcome(CRASHED in out, f"{self.params.table}: {out[-200:]}")

    def revert(self, shell: Shell) -> None:
        if self.conf:
            repair = shlex.quote(f"REPAIR TABLE {self.params.table}")
            shell.run(f"mariadb -N -e {repair}; rm -f {shlex.quote(self.conf)}", timeout=30)
