"""Authentication still demanded, proved from outside: nobody gets in who was refused.

A service that answers again because it now lets anyone in (an anonymous MariaDB
account, a password emptied, a server that skips its grant tables, sshd taking
passwords or no credential at all) passes every check that asks whether it answers,
and it can get there without a configuration file changing (a grant made at runtime, a
daemon started by other means). The gates on files, grant tables and settings see the
causes they know; this one proves the result where it matters, at each door the
healthy host had, as a stranger would knock:

- MariaDB, at its socket and at each TCP listener: the shop's account with a wrong
  password and with none, and an unknown account with none;
- sshd, at each listener: which methods it offers root (``none`` accepted is a way in,
  a method more is a wider door) and, where it offers passwords, whether a wrong one is
  refused.

Names and passwords are drawn afresh for each knock: the code is public, so a fixed
wrong password could be made a right one. The healthy host's answers are recorded; an
answer the faults changed (a server down, a flood answering "too many connections")
is accepted as they left it, the scenario's checks judge it. Any other answer fails,
named, and a door the healthy host had that no longer answers fails too: a missing
listener proves no refusal.

The knocks go from this machine into the host's network namespace and, for the
socket, through its root (``fixos.stack.host_files``), so no program of the host takes
part. Where the engine is remote, the judge's ``mariadb`` client knocks at MariaDB and
sshd is not judged (the judge has no ssh client). An exported task's verifier does not
judge this gate.
"""

from __future__ import annotations

import secrets
import shlex
import time
from typing import Any

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Facts, Probe
from .posture import listeners
from .steady import named
from .vantage import MARIADB_SOCKET
from .wire import login

MARIADB_PORT, SSH_PORT = "3306", "22"
KNOCK_SECONDS = 3.0
"""how long one knock may take: a door that accepts and then says nothing is not waited for."""
TRIES = 3
"""knocks at a door whose answer is not the healthy one, in a final verdict (a restart just
ended, a loaded machine): an answer that holds 3 times, 0.3 s apart, is the answer."""
MARIADB_KNOCKS = ("shop, a wrong password", "shop, no password", "a stranger, no password")
SSH_KNOCKS = ("root's methods",)
NOT_KNOCKED = "not judged: sshd is knocked at in the final verdict's last judgement"
WATCHED = ["/etc/ssh", "/etc/pam.d", "/etc/mysql", "/etc/passwd", "/etc/shadow", "/var/lib/mysql/mysql"]
"""what the answers follow from, with the daemons' processes and listeners."""


def doors(lines: list[str]) -> list[str]:
    """The listeners (as ``listeners`` names them) where a stranger may knock; IPv6's any
    address only where no IPv4 one has the port (engines give hosts no IPv6 by default,
    so nothing there answers, and the same daemon listens on both)."""
    found = set()
    v4_any = {line.rsplit(":", 1)[-1] for line in lines if line.startswith("tcp 0.0.0.0:")}
    for line in lines:
        if line.startswith("tcp [::]:") and line.rsplit(":", 1)[-1] in v4_any:
            continue
        proto, _, rest = line.partition(" ")
        where = rest.split(" ")[0]
        if proto == "tcp" and where.rsplit(":", 1)[-1] in (MARIADB_PORT, SSH_PORT):
            found.add(f"tcp {where}")
        elif proto == "unix" and where == MARIADB_SOCKET:
            found.add(f"unix {where}")
    return sorted(found)


def knocks(door: str) -> tuple[str, ...]:
    return SSH_KNOCKS if door.endswith(":" + SSH_PORT) else MARIADB_KNOCKS


def _address(where: str, local: Any) -> tuple[str, int]:
    """Where to connect for a TCP listener: an any-address at the host's own address (as
    its peers reach it; MariaDB then sees no local client), IPv6's any at ``::1``."""
    host, _, port = where.rpartition(":")
    if host in ("0.0.0.0", "*"):
        host = local.own_address() or "127.0.0.1"
    elif host == "[::]":
        host = "::1"
    return host.strip("[]"), int(port)


def _credentials(who: str) -> tuple[str, str]:
    user = "shop" if who.startswith("shop") else "fixos-" + secrets.token_hex(6)
    return user, ("" if who.endswith("no password") else secrets.token_urlsafe(12))


def _knock_here(local: Any, door: str, who: str) -> str:
    proto, _, where = door.partition(" ")
    if proto == "unix":
        return login(lambda t: local.connect(where, t), *_credentials(who), KNOCK_SECONDS)
    host, port = _address(where, local)
    if who in SSH_KNOCKS:
        try:
            sock = local.connect_tcp(host, port, KNOCK_SECONDS)
        except OSError as exc:
            return f"no answer: {exc}"[:200]
        return ssh_methods(sock)
    return login(lambda t: local.connect_tcp(host, port, t), *_credentials(who), KNOCK_SECONDS)


def _knock_by_judge(probe: Probe, door: str, who: str) -> str:
    proto, _, where = door.partition(" ")
    if who in SSH_KNOCKS:
        return "not judged: the judge has no ssh client"
    user, password = _credentials(who)
    if proto == "unix":
        target = f"--socket={shlex.quote(probe.path(where))}"
    else:
        host, port = where.rpartition(":")[::2]
        host = {"0.0.0.0": "127.0.0.1", "*": "127.0.0.1", "[::]": "::1"}.get(host, host).strip("[]")
        target = f"--protocol=TCP -h {shlex.quote(host)} -P {port}"
    secret = f"--password={shlex.quote(password)}" if password else "--skip-password"
    command = (
        f"mariadb --no-defaults {target} -u {shlex.quote(user)} {secret} "
        f"--connect-timeout={int(KNOCK_SECONDS)} -N -B -e 'SELECT 1' 2>&1"
    )
    out = probe.shell.run(command, timeout=KNOCK_SECONDS + 5)
    said = out.output.strip()
    if out.exit_code == 0:
        return "accepted"
    if said.startswith(("ERROR 1045 ", "ERROR 1698 ")):
        return "refused"
    if said.startswith(("ERROR 2002 ", "ERROR 2003 ", "ERROR 2013 ")) or out.timed_out:
        return f"no answer: {said}"[:200]
    return said[:200] or f"mariadb exited {out.exit_code}"


def ssh_methods(sock: Any) -> str:
    """What sshd on ``sock`` lets root do without a key: ``methods publickey``, with
    ``; password refused`` where it takes passwords and refuses a wrong one."""
    import paramiko  # not in an exported task's verifier, which does not judge this gate

    transport = paramiko.Transport(sock)
    try:
        transport.start_client(timeout=KNOCK_SECONDS)
        try:
            transport.auth_none("root")
        except paramiko.BadAuthenticationType as exc:
            methods = sorted(exc.allowed_types)
        else:
            return "accepted with no credential"
        said = "methods " + ",".join(methods)
        wrong = secrets.token_urlsafe(12)
        if "password" in methods:
            said += "; password " + _refused(lambda: transport.auth_password("root", wrong))
        if "keyboard-interactive" in methods:
            answer = _refused(lambda: transport.auth_interactive("root", lambda *a: [wrong] * len(a[2])))
            said += "; keyboard-interactive " + answer
        return said
    except (paramiko.SSHException, OSError, EOFError) as exc:
        return f"no answer: {type(exc).__name__}: {exc}"[:200]
    finally:
        transport.close()


def _refused(attempt) -> str:
    import paramiko

    try:
        attempt()
    except paramiko.AuthenticationException:
        return "refused"
    return "accepted"


def answers(probe: Probe, wanted: dict[str, str] | None = None) -> dict[str, str]:
    """``door: who`` -> what the host answered, for every knock at every door; with
    ``wanted`` (the answers that pass), a knock answered otherwise is tried again in a
    final verdict, and a door that did not answer is not knocked at further."""
    local = getattr(probe.access, "local_files", lambda: None)()
    lines = listeners(probe) if wanted is None else sorted({key.split(": ")[0] for key in wanted})
    # sshd's answer costs a key exchange (~20 CPU-ms, most of it sshd's) and a process in
    # the host, which a running score would then see as the host's processes moving (no
    # outcome kept, every session asked): knocked at on the healthy host and in the final
    # verdict's last judgement only, which decides the reward with the first
    knock_sshd = wanted is None or (probe.patient and probe.holding)
    found: dict[str, str] = {}
    for door in doors(lines):
        silent = None
        for who in knocks(door):
            key = f"{door}: {who}"
            if who in SSH_KNOCKS and not knock_sshd:
                found[key] = NOT_KNOCKED
                continue
            if silent is not None:
                found[key] = silent
                continue
            for attempt in range(TRIES if probe.patient and wanted is not None else 1):
                if attempt:
                    time.sleep(0.3)
                said = (
                    _knock_here(local, door, who) if local is not None else _knock_by_judge(probe, door, who)
                )
                if wanted is None or said in wanted.get(key, "").split("\n") or probe.settled.is_set():
                    break
            found[key] = said
            silent = said if said.startswith("no answer") else None
    return found


@CHECKS.register
class AuthDemanded(Check):
    """Every door of the healthy host still refuses whom it refused: no MariaDB login
    without the right password, no sshd method more, no wrong password taken."""

    type = "auth_demanded"
    exported = False

    class Params(CheckParams):
        pass

    def snapshot(self, probe: Probe) -> Any:
        if not probe.root:
            return None  # the exported verifier, inside the host: see the module's text
        healthy = answers(probe)
        if not healthy:
            raise RuntimeError("the healthy host shows no door to knock at (MariaDB, sshd)")
        accepted = [key for key, said in healthy.items() if said.startswith("accepted")]
        if accepted:
            raise RuntimeError(f"the healthy host lets a stranger in: {named(accepted)}")
        return {"healthy": healthy, "faults": {}}

    def refine(self, probe: Probe, baseline: Any) -> Any:
        if baseline is None:
            return None
        now = answers(probe, {k: v for k, v in baseline["healthy"].items()})
        faults = {k: v for k, v in now.items() if v != baseline["healthy"].get(k) and v != NOT_KNOCKED}
        return {**baseline, "faults": faults}

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        return facts.files(WATCHED) + facts.processes() + facts.listening()

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        if baseline is None:
            return Outcome(True, "not judged: this verifier runs inside the host")
        healthy, faults = baseline["healthy"], baseline["faults"]
        wanted = {k: "\n".join({v, faults.get(k, v)}) for k, v in healthy.items()}
        now = answers(probe, wanted)
        wrong: list[str] = []
        for key, said in now.items():
            if said in wanted[key].split("\n") or said.startswith("not judged"):
                continue
            door = key.split(": ")[0]
            # a door that does not answer is one line, not one a knock
            line = (
                f"{door}: {said} (the healthy host answered)"
                if said.startswith("no answer")
                else (f"{key}: {said} (healthy: {healthy[key]})")
            )
            if line not in wrong:
                wrong.append(line)
        if wrong:
            return Outcome(False, "a door answers otherwise than the healthy host's: " + named(wrong, 3))
        left = sum(1 for key in faults if now.get(key) == faults[key])
        return Outcome(
            True,
            f"{len(now)} knock(s) at {len(doors(list({k.split(': ')[0] for k in now})))} door(s) "
            "answered as on the healthy host"
            + (f"; {left} as the faults left them (the scenario's checks judge those)" if left else ""),
        )
