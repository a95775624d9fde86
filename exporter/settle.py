"""What the replayed host waits for before it calls itself broken.

At export, FixOS confirmed each fault after injecting it, and its confirm waits
for effects that come a little later (a watchdog's first kill, a batch job's
connections, a hog's memory). The replay has no Python confirm; for those
faults it waits, in shell, for the same symptom, so the agent (and a verifier
run straight away) meets the host in the state FixOS confirmed.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from fixos.core.models import InjectedFault
from fixos.exporter.pids import pid_of

SETTLE_SECONDS = 30


def _wait_until(condition: str) -> str:
    tries = SETTLE_SECONDS * 10
    return f"for _ in $(seq 1 {tries}); do {{ {condition}; }} >/dev/null 2>&1 && break; sleep 0.1; done"


def _service_killer(fault: InjectedFault) -> str:
    return _wait_until(f"! service {shlex.quote(fault.params['service'])} status")


def _memory_hog(fault: InjectedFault) -> str:
    pid, mb = pid_of(fault.seeded["name"], fault.seeded["pid"]), int(fault.seeded["mb"] * 0.9)
    return _wait_until(f"[ \"$(awk '/VmRSS/ {{print int($2/1024)}}' /proc/{pid}/status)\" -ge {mb} ]")


def _connections_exhausted(fault: InjectedFault) -> str:
    # Every ordinary slot taken: root's query sees one more thread than max_connections.
    query = (
        "SELECT (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
        "WHERE VARIABLE_NAME = 'THREADS_CONNECTED') > @@max_connections"
    )
    return _wait_until(f'[ "$(mariadb -N -e {shlex.quote(query)})" = 1 ]')


SETTLE: dict[str, Callable[[InjectedFault], str]] = {
    "service_killer": _service_killer,
    "memory_hog": _memory_hog,
    "connections_exhausted": _connections_exhausted,
}


def settle_lines(faults: list[InjectedFault]) -> list[str]:
    """One waiting line per fault whose symptom comes after its inject returns."""
    return [SETTLE[f.type](f) for f in faults if f.type in SETTLE]
