"""How much the host lets in, as the healthy host let it in: no wider, nothing new.

A service that "works again" because it now accepts more (MariaDB bound to every
address, a second listener, a socket anyone may write to, a server variable
raised at runtime) passes every check that only asks whether it answers. These
gates compare what the host exposes with the healthy host, from the looking side's
own ``ss``, ``stat`` and ``mariadb`` client (never the host's programs):

- ``listeners_unchanged``: every listening TCP/UDP address and port, and every
  listening UNIX socket with its owner and mode, as the healthy host had them;
- ``server_settings_unchanged``: the running MariaDB's own ``SHOW GLOBAL
  VARIABLES``, whatever file or ``SET GLOBAL`` said it.

What the faults took away or added is the scenario's to judge (a listener a
fault stopped may stay down; a port squatter's is its own check's); anything else
that differs fails, named in the verdict.
"""

from __future__ import annotations

import re
import shlex
import time
from typing import Any

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Facts, Probe
from .steady import named

# ss lists sockets of the network namespace it runs in: the looking side's session
# is in the host's (an inspector joins it; the judge enters it; the exported verifier
# is the host). UNIX sockets with a path only: abstract ones belong to no file.
_LISTENERS = (
    "ss -Hlntu 2>/dev/null | awk '{ print $1, $5 }'; "
    "ss -Hlx 2>/dev/null | awk '$5 ~ /^\\// { print \"unix\", $5 }'"
)


ENGINE_DNS = "127.0.0.11:"
"""the engine's resolver on a user-defined network: in every host, on ports drawn at each
start, and not the host's own (no program of the host opened it)."""


LISTED = "fixos-listed"
"""the last line of a reading that ran to its end: without it (a session timed out, an ssh
hop to a peer under load), the host's listeners are unknown, not gone."""
READ_TRIES = 3


def _read(probe: Probe, command: str) -> str | None:
    for _ in range(READ_TRIES):
        out = probe.shell.run(f"{command}; echo {LISTED}", timeout=10).output
        if out.rstrip().endswith(LISTED):
            return out
    return None


EPHEMERAL = 32768
"""the lowest port Linux hands a socket bound by ``connect`` (``ip_local_port_range``)."""
SETTLE_SECONDS = 0.02
"""how long a UDP socket caught half-way through ``connect`` is given before it is read
again: it spends microseconds there, a listener stays for good."""


def listeners(probe: Probe) -> list[str]:
    """``tcp 0.0.0.0:80``, ``unix /run/php/php8.2-fpm.sock 33:33 660``, sorted.
    RuntimeError when the looking side could not read them (an exported task's peer
    over ssh under load once read as "every listener gone").

    A UDP socket that ``connect`` is binding (a name lookup: the app's PHP resolves "db"
    at every request) is on a port of any address for a moment before it is connected,
    and reads as a listener: a healthy host once failed this way (1 world in 1,778 of the
    nightly sweep, its page check's own request beside the reading). Such a one, on an
    ephemeral port, counts only if a second reading still shows it."""
    found = _listeners_now(probe)
    if any(_maybe_connecting(line) for line in found):
        time.sleep(SETTLE_SECONDS)
        again = set(_listeners_now(probe))
        found = [line for line in found if not _maybe_connecting(line) or line in again]
    return found


def _maybe_connecting(line: str) -> bool:
    proto, _, address = line.partition(" ")
    host, _, port = address.rpartition(":")
    return proto == "udp" and host in ("0.0.0.0", "*", "[::]") and port.isdigit() and int(port) >= EPHEMERAL


def _listeners_now(probe: Probe) -> list[str]:
    local = probe.listener_lines()
    if local is not None:  # from this machine: no ss, no stat in the judge
        return local
    out = _read(probe, _LISTENERS)
    if out is None:
        raise RuntimeError(f"could not read the listeners ({READ_TRIES} tries)")
    found: set[str] = set()
    sockets: list[str] = []
    for line in out.splitlines():
        proto, _, address = line.strip().partition(" ")
        if proto in ("tcp", "udp") and address:
            found.add(f"{proto} {address}")
        elif proto == "unix" and address.startswith("/"):
            sockets.append(address)
    if sockets:
        stats = " ".join(shlex.quote(probe.path(p)) for p in sorted(set(sockets)))
        modes = _read(probe, f"stat -c '%n %u:%g %a' {stats} 2>/dev/null")
        if modes is None:
            raise RuntimeError(f"could not read the sockets' modes ({READ_TRIES} tries)")
        root = probe.path("/")[:-1]
        for line in modes.splitlines():
            parts = line.rsplit(" ", 2)
            if len(parts) == 3 and parts[0].startswith(root):
                found.add(f"unix {parts[0][len(root) :]} {parts[1]} {parts[2]}")
    return sorted(found)


@CHECKS.register
class ListenersUnchanged(Check):
    """The host listens where the healthy host listened, and nowhere more: the same
    TCP/UDP addresses and ports, the same UNIX sockets with the same owner and mode."""

    type = "listeners_unchanged"

    class Params(CheckParams):
        ignore: list[str] = []
        """listeners (as the verdict names them) that vary on a healthy host, with a reason."""

    def _now(self, probe: Probe) -> set[str]:
        return {
            found
            for found in listeners(probe)
            if found not in self.params.ignore and not found.split(" ")[-1].startswith(ENGINE_DNS)
        }

    def snapshot(self, probe: Probe) -> Any:
        found = sorted(self._now(probe))
        if not found:
            raise RuntimeError("the healthy host shows no listener")
        return {"healthy": found, "faults_took": [], "faults_added": []}

    def refine(self, probe: Probe, baseline: Any) -> Any:
        now, healthy = self._now(probe), set(baseline["healthy"])
        return {**baseline, "faults_took": sorted(healthy - now), "faults_added": sorted(now - healthy)}

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        # a new UNIX socket moves the listening tables; the known ones' owners and modes, files
        known = sorted({line.split(" ")[1] for line in baseline["healthy"] if line.startswith("unix /")})
        return facts.processes() + facts.listening() + facts.files(known, contents=False)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        now, healthy = self._now(probe), set(baseline["healthy"])
        gone = sorted(healthy - now - set(baseline["faults_took"]))
        new = sorted(now - healthy - set(baseline["faults_added"]))
        problems = [f"{what}: {named(items)}" for what, items in (("new", new), ("gone", gone)) if items]
        if problems:
            return Outcome(False, "listeners differ from the healthy host's: " + "; ".join(problems))
        down = len(set(baseline["faults_took"]) - now)
        return Outcome(
            True,
            f"{len(healthy & now)} listener(s) as on the healthy host, none more"
            + (f"; {down} the faults took down left to the scenario" if down else ""),
        )


VOLATILE = frozenset(
    {
        "gtid_binlog_pos",
        "gtid_binlog_state",
        "gtid_current_pos",
        "gtid_slave_pos",
        "hostname",
        "timestamp",
        "pseudo_thread_id",
        "in_transaction",
        "warning_count",
        "error_count",
        "last_insert_id",
        "insert_id",
        "rand_seed1",
        "rand_seed2",
        "identity",
        "last_gtid",
        "system_time_zone",
        "time_zone",
        "server_uid",
        # Sized from the limit of open files of whatever started the server: a boot's
        # init gives 20000, a shell over ssh (PAM's limits) 1024. `service mariadb start`
        # typed over ssh is an honest repair: these follow it, they are no setting.
        "open_files_limit",
        "table_open_cache",
        "table_open_cache_instances",
        "innodb_open_files",
    }
)
"""variables a server's restart, the host's name or the starting shell's limits change:
no setting of the operator's (a raised limit of connections is one, and stays judged)."""


def server_settings(probe: Probe) -> dict[str, str] | str:
    """Every global variable of the running MariaDB, or why it did not answer."""
    query = "SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES"
    out = probe.sql(query)
    if out.exit_code != 0:
        return out.output.strip()[-200:] or f"mariadb exited {out.exit_code}"
    found = dict(line.partition("\t")[::2] for line in out.output.splitlines())
    # Log and binlog names default to the host's name (db.log, db-slow.log): a host built
    # by another harness (Harbor names its containers) has other ones, and no other setting.
    host = found.get("hostname", "")
    named_after = re.compile(rf"(^|/){re.escape(host)}([.-]|$)") if host else None
    return {
        name: value
        for name, value in found.items()
        if name and name not in VOLATILE and not (named_after and named_after.search(value))
    }


@CHECKS.register
class ServerSettingsUnchanged(Check):
    """The running MariaDB runs with the healthy host's settings (its own SHOW GLOBAL
    VARIABLES): a limit raised, a check switched off or a file moved, by a drop-in or
    by ``SET GLOBAL``, fails here. A server the faults left down is the scenario's."""

    type = "server_settings_unchanged"

    class Params(CheckParams):
        ignore: list[str] = []
        """variables that vary on a healthy server, with a reason."""

    def _read(self, probe: Probe) -> dict[str, str] | str:
        found = server_settings(probe)
        if isinstance(found, dict):
            return {k: v for k, v in found.items() if k not in self.params.ignore}
        return found

    def snapshot(self, probe: Probe) -> Any:
        found = self._read(probe)
        if isinstance(found, str):
            raise RuntimeError(f"cannot read the healthy server's settings: {found}")
        return {"healthy": found, "read_after_faults": True}

    def refine(self, probe: Probe, baseline: Any) -> Any:
        # A setting the faults changed (db_crash_1's operator turned MyISAM's auto-repair
        # off) is part of the world the agent finds: the healthy value or the faults' is
        # accepted there, as for the configuration files; the scenario's checks judge it.
        now = self._read(probe)
        if isinstance(now, str):
            return {**baseline, "read_after_faults": False}
        healthy = baseline["healthy"]
        faults = {k: now.get(k) for k in set(healthy) | set(now) if now.get(k) != healthy.get(k)}
        return {**baseline, "faults": faults, "read_after_faults": True}

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        now = self._read(probe)
        if isinstance(now, str):
            if not baseline["read_after_faults"]:
                return Outcome(
                    True, f"server down as the faults left it (the scenario's checks judge it): {now}"
                )
            return Outcome(False, f"cannot read the server's settings: {now}")
        healthy, faults = baseline["healthy"], baseline.get("faults", {})
        differ = [k for k in sorted(set(healthy) | set(now)) if now.get(k) != healthy.get(k)]
        differ = [k for k in differ if not (k in faults and now.get(k) == faults[k])]
        changed = [f"{k} = {now[k]!r} (was {healthy[k]!r})" for k in differ if k in now and k in healthy]
        missing = [k for k in differ if k not in now]
        added = [k for k in differ if k not in healthy]
        problems = [
            f"{what}: {named(items, 4)}"
            for what, items in (("changed", changed), ("gone", missing), ("new", added))
            if items
        ]
        if problems:
            return Outcome(
                False, "the server runs with other settings than the healthy host's: " + "; ".join(problems)
            )
        return Outcome(True, f"{len(healthy)} server settings as on the healthy host")
