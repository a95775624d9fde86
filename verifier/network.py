"""Checks of the network between the shop's hosts, measured on the real path.

They run in the judge's session in the checked host's network namespace (with its
own tools), or, for ``db_reachable`` where the host is this machine's, in a socket this
process makes in that namespace (the name resolved by the session's ``getent``): either
way a connect to ``db:3306`` goes out of that host's eth0, through its qdiscs, across the
bridge and through the db host's firewall, as the app's own connections do. Nothing here
asks a program of the host.
"""

from __future__ import annotations

import re
import shlex
import time
from typing import Any

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Probe
from .held import HELD_SECONDS

FILTERED = 124
"""``timeout``'s exit code: the connect neither succeeded nor was refused (dropped)."""


def connect_command(host: str, port: int, seconds: float) -> str:
    """Open a TCP connection and print what the server says first (MariaDB's greeting
    names its version), within ``seconds``."""
    inner = f"exec 3<>/dev/tcp/{host}/{port} && head -c 100 <&3"
    return f"timeout {seconds} bash -c {shlex.quote(inner)} | tr -c '[:print:]' ' '"


@CHECKS.register
class DbReachable(Check):
    """From the checked host (the app), MariaDB on ``host:port`` answers a TCP connect
    with its greeting within ``seconds``: the name resolves, the route, qdiscs and the
    db host's firewall let it through, and MariaDB listens beyond loopback. A SYN the
    network holds fails it at once (``_greeting``) where the host is this machine's."""

    type = "db_reachable"

    class Params(CheckParams):
        host: str = "db"
        port: int = 3306
        seconds: float = 3.0

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        p = self.params
        local = getattr(probe.access, "local_files", lambda: None)()
        if local is not None:
            said = _greeting(probe, local, p.host, p.port, p.seconds)
        else:  # a host not read from this machine (a remote engine, the exported verifier)
            said = probe.shell.run(connect_command(p.host, p.port, p.seconds), timeout=p.seconds + 10).output
        version = re.search(r"[0-9.]+-MariaDB", said)
        if version:
            return Outcome(True, f"{p.host}:{p.port} answers as {version.group(0)}")
        heard = said.strip()[:200] or "nothing"
        return Outcome(False, f"no MariaDB greeting from {p.host}:{p.port} within {p.seconds} s: {heard}")


def _greeting(probe: Probe, local: Any, host: str, port: int, seconds: float) -> str:
    """What ``host:port`` says first to a connect made in the checked host's network namespace
    from this machine, or why nothing: the name resolved as the host resolves it (``getent``
    there, in the order a connect tries them), each address tried in turn, a SYN unanswered
    for ``HELD_SECONDS`` given up as held by the network (``fixos.verifier.held``: on this
    bridge a SYN is answered within a millisecond) rather than waited for until ``seconds``."""
    deadline = time.monotonic() + seconds
    named = probe.shell.run(f"timeout {seconds} getent ahosts {shlex.quote(host)}", timeout=seconds + 10)
    addresses = list(dict.fromkeys(m.group(1) for m in re.finditer(r"^(\S+)\s+STREAM", named.output, re.M)))
    if not addresses:
        return f"{host} does not resolve there"
    why = []
    for address in addresses:
        try:
            sock = local.connect_tcp(address, port, HELD_SECONDS)
        except TimeoutError:
            why.append(f"{address}: its SYN unanswered over {HELD_SECONDS:g} s (held by the network)")
            continue
        except OSError as exc:
            why.append(f"{address}: {exc.strerror or exc}")
            continue
        said = b""
        with sock:
            try:
                while len(said) < 100 and not re.search(rb"[0-9.]+-MariaDB", said):
                    sock.settimeout(max(0.01, deadline - time.monotonic()))
                    chunk = sock.recv(100 - len(said))
                    if not chunk:
                        break
                    said += chunk
            except OSError:
                pass
        return said.decode("latin-1").translate(_UNPRINTABLE) or f"{address}: nothing"
    return "; ".join(why)


_UNPRINTABLE = {c: " " for c in range(256) if not chr(c).isprintable()}
"""as ``tr -c '[:print:]' ' '``: what the server said, on one line."""


def _qdiscs(probe: Probe) -> list[str]:
    """The root qdiscs, kind and device (handles dropped: a re-added default differs only there)."""
    shown = probe.shell.run("tc qdisc show", timeout=10).output
    kinds = [re.match(r"qdisc (\S+) \S+ dev (\S+) (root|parent \S+)", line) for line in shown.splitlines()]
    return sorted(f"{m.group(1)} dev {m.group(2)} {m.group(3)}" for m in kinds if m)


@CHECKS.register
class QdiscUnchanged(Check):
    """The host's traffic control is as it was healthy: no shaper (tbf, htb, ...) left
    on any interface. ``tc qdisc show`` needs no NET_ADMIN, so the inspector reads it."""

    type = "qdisc_unchanged"

    def snapshot(self, probe: Probe) -> Any:
        return _qdiscs(probe)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        now = _qdiscs(probe)
        extra = sorted(set(now) - set(baseline or []))
        if extra:
            return Outcome(False, f"traffic shaping added: {'; '.join(extra)}")
        return Outcome(True, f"qdiscs as healthy: {'; '.join(now) or 'none'}")


def _port_states(probe: Probe, host: str, ports: list[int]) -> dict[str, str]:
    """port -> filtered, refused or open, each probed at once from the checked host."""
    connects = [(port, shlex.quote(f"exec 3<>/dev/tcp/{host}/{port}")) for port in ports]
    probes = " ".join(f"( timeout 2 bash -c {c} 2>/dev/null; echo {port} $? ) & " for port, c in connects)
    out = probe.shell.run(f"{probes} wait", timeout=20).output
    states = {}
    for port, code in re.findall(r"^(\d+) (\d+)$", out, re.M):
        states[port] = "open" if code == "0" else "filtered" if int(code) == FILTERED else "refused"
    return states


@CHECKS.register
class FirewallKept(Check):
    """The db host's firewall lets the database port through from the checked host
    and still filters what it filtered once the faults were in
    (ports no service of the shop uses, probed from the checked host): an agent that
    "repairs" the database port by flushing every rule or opening the policy loses
    the hardening and this check. On the healthy host nothing is filtered: it passes."""

    type = "firewall_kept"

    class Params(CheckParams):
        host: str = "db"
        ports: list[int] = [5432, 6379, 8080, 11211]
        db_port: int = 3306

    def snapshot(self, probe: Probe) -> Any:
        return []

    def refine(self, probe: Probe, baseline: Any) -> Any:
        states = _port_states(probe, self.params.host, self.params.ports)
        return sorted(p for p, s in states.items() if s == "filtered")

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        p = self.params
        db = _port_states(probe, p.host, [p.db_port]).get(str(p.db_port), "no answer")
        if db != "open":
            return Outcome(False, f"{p.host}:{p.db_port} is {db} from here")
        if not baseline:
            return Outcome(True, f"{self.params.host} filtered none of the probed ports")
        states = _port_states(probe, self.params.host, [int(p) for p in baseline])
        opened = [f"{p} {s}" for p, s in states.items() if s != "filtered"]
        if opened or len(states) != len(baseline):
            lost = ", ".join(opened) or str(states)
            return Outcome(False, f"{self.params.host}'s firewall no longer filters: {lost}")
        return Outcome(True, f"{self.params.host} still filters ports {', '.join(baseline)}")
