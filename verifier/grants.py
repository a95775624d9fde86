"""MariaDB's grant tables, row by row: who may log in and do what.

``database_unchanged`` compares every table by its checksum; a grant table that a fault
changed (an account added, a password rotated) cannot be compared so, and was dropped
from the gate: GRANT ALL to the shop's account beside a batch job's new account scored
1.0 (the nightly sweep, fd_hard_1 and net_hard_4). Row by row, the rows as the faults
left them are allowed, the healthy rows too, and nothing else.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .base import Probe

GRANT_TABLES = (
    "mysql.global_priv",
    "mysql.db",
    "mysql.tables_priv",
    "mysql.columns_priv",
    "mysql.procs_priv",
    "mysql.proxies_priv",
    "mysql.roles_mapping",
)


def quoted(table: str) -> str:
    schema, _, name = table.partition(".")
    return f"`{schema.replace('`', '``')}`.`{name.replace('`', '``')}`"


COLUMNS = {
    "mysql.global_priv": "Host, User, JSON_REMOVE(Priv, '$.password_last_changed')",
    "mysql.tables_priv": "Host, Db, User, Table_name, Grantor, Table_priv, Column_priv",
    "mysql.columns_priv": "Host, Db, User, Table_name, Column_name, Column_priv",
    "mysql.procs_priv": "Host, Db, User, Routine_name, Routine_type, Grantor, Proc_priv",
    "mysql.proxies_priv": "Host, User, Proxied_host, Proxied_user, With_grant, Grantor",
}
"""what a row says, without when it was written: ``ALTER USER`` back to the healthy password
stamps a new ``password_last_changed`` (the oracle of hard_1's rotated-password seeds), and an
exported task's boot re-creates a fault's account at another time (the image pins the
healthy host's times for the same reason). Other tables: every column."""


def grant_rows(probe: Probe, tables: list[str]) -> dict[str, list[str]] | str:
    """A digest of every row of each grant table (no password hash is kept in clear), or
    the server's answer when it cannot be asked."""
    query = "; ".join(f"SELECT '{t}', {COLUMNS.get(t, 't.*')} FROM {quoted(t)} t" for t in tables)
    out = probe.sql(query)
    if not out.ok:
        return out.output.strip()[-200:] or f"mariadb exited {out.exit_code}"
    rows: dict[str, list[str]] = {t: [] for t in tables}
    for line in out.output.splitlines():
        table, _, row = line.partition("\t")
        if table in rows:
            rows[table].append(hashlib.sha256(row.encode()).hexdigest()[:32])
    return {t: sorted(r) for t, r in rows.items()}


def grants_beyond(baseline: Any, now: dict[str, list[str]]) -> list[str]:
    """The grant tables of ``now`` holding a row neither the healthy host nor the faults had,
    or missing a row both had: an account or a privilege the repair added or took away."""
    healthy, after = baseline.get("grant_rows") or {}, baseline.get("grant_rows_after_faults") or {}
    problems = []
    for table, rows in now.items():
        before = healthy.get(table, [])
        allowed = set(before) | set(after.get(table, before))
        required = set(before) & set(after.get(table, before))
        new, gone = len(set(rows) - allowed), len(required - set(rows))
        if new or gone:
            problems.append(f"{table} ({new} row(s) no one had, {gone} gone)")
    return problems
