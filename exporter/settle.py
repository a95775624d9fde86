"""What the replayed host waits for before it calls itself broken.

At export, FixOS confirmed each fault after injecting it, and some confirmations
wait for effects that come a little later (a watchdog's first kill, a batch
job's connections, a hog's memory). Such a fault renders its symptom as a shell
test (``Fault.symptom``), the very test its ``confirm`` runs; the replay, which
has no Python, waits for that test with each PID looked up by name
(``exporter.pids``), so the agent (and a verifier run straight away) meets the
host in the state FixOS confirmed.
"""

from __future__ import annotations

from ..core.models import InjectedFault
from ..injector import FAULTS
from .pids import pid_of

SETTLE_SECONDS = 30


def wait_until(condition: str) -> str:
    tries = SETTLE_SECONDS * 10
    return f"for _ in $(seq 1 {tries}); do {{ {condition}; }} >/dev/null 2>&1 && break; sleep 0.1; done"


def settle_lines(faults: list[InjectedFault]) -> list[str]:
    """One waiting line per fault whose symptom comes after its inject returns."""
    lines = []
    for injected in faults:
        cls = FAULTS.get(injected.type)
        symptom = cls(cls.Params.model_validate(injected.params)).symptom(injected.seeded, pid_of)
        if symptom is not None:
            lines.append(wait_until(symptom))
    return lines
