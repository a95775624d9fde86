"""The Fault contract, the registry, and injecting a scenario's faults with confirmation."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ..core.errors import FixOSError, InvalidEpisode
from ..core.models import InjectedFault, Outcome
from ..core.registry import Registry
from ..shells.base import Shell

CONFIRM_TIMEOUT = 10.0

PidWord = Callable[[str, int], str]
"""(process name, PID it got) -> a shell word for its PID where a symptom test runs."""


def plain_pid(name: str, pid: int) -> str:
    """The PID itself: the process runs where the fault started it."""
    return str(int(pid))


class FaultParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Fault:
    """One way to break a host. Subclasses set ``type`` and ``Params`` and implement three methods.

    ``prepare`` (optional) does the groundwork that forks processes, before
    any fault's ``inject``: faults that need exact PIDs spawn back to back.
    ``inject`` breaks the host and returns the variable parts it drew from ``rng``
    (so the same seed gives the same world); ``confirm`` proves the symptom is
    observable; ``revert`` undoes the fault (used by tests, not by episodes).
    What ``prepare`` and ``inject`` learn (names, PIDs) is declared by the
    subclass's ``__init__``, empty until they run.

    A fault whose symptom shows only some time after ``inject`` returns (a
    watchdog's first round, memory being filled) also renders that symptom as a
    shell test (``symptom``); its ``confirm`` runs that very test, and a replay of
    the fault that has no Python (the Harbor export) waits for it.
    """

    type: ClassVar[str]
    Params: ClassVar[type[FaultParams]] = FaultParams
    returns: ClassVar[bool] = False
    """it keeps acting until its cause is removed (a watchdog, a cron job): what it keeps
    down may die at any moment after a restart, so the durability phase's hold leaves those
    services to the scenario's checks rather than to when its next round falls."""
    records: ClassVar[tuple[str, ...]] = ()
    """the keys of what ``inject`` returns: what a solution may name (``{{ hog.pid }}``);
    checked at load time against a scenario's templates, at inject against what it returned."""

    def __init__(self, params: FaultParams) -> None:
        self.params = params

    def symptom(self, seeded: Mapping[str, Any], pid: PidWord = plain_pid) -> str | None:
        """A shell test that succeeds once the symptom shows, for the fault whose
        ``inject`` returned ``seeded``; a process it started is named by the shell
        word ``pid(name, pid)``. None: the symptom is there when ``inject`` returns."""
        return None

    def fix(self, seeded: Mapping[str, Any]) -> str | None:
        """The reference repair of this fault as shell, for the fault whose ``inject``
        returned ``seeded`` (values as ``fixos.core.words.word`` quotes them), run on its
        own host; a solution calls it as ``{{ fix(NAME) }}``. It undoes the fault's own
        change only: restarting what the fault left down, and in which order, is the
        scenario's. None: this type has none (a solution then writes the repair out)."""
        return None

    @classmethod
    def has_fix(cls) -> bool:
        return cls.fix is not Fault.fix

    def prepare(self, shell: Shell, rng: random.Random) -> None:
        return None

    def pins_pid(self) -> bool:
        """Whether ``inject`` starts a process at a PID the scenario fixed (a ``pid`` or
        ``pids`` param): such a fault must inject before any fault that forks."""
        return bool(getattr(self.params, "pid", None) or getattr(self.params, "pids", None))

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        raise NotImplementedError

    def confirm(self, shell: Shell) -> Outcome:
        raise NotImplementedError

    def revert(self, shell: Shell) -> None:
        raise NotImplementedError


FAULTS: Registry[Fault] = Registry("fault type")
"""Every fault type: each class registers itself with ``@FAULTS.register`` (see the end of this module)."""


def fault_rng(seed: int, index: int, fault_type: str) -> random.Random:
    """Each fault draws from its own stream, so adding a fault does not reshuffle the others."""
    return random.Random(f"fixos:{seed}:{index}:{fault_type}")


def _confirm(fault: Fault, shell: Shell, timeout: float) -> Outcome:
    deadline = time.monotonic() + timeout
    while True:
        outcome = fault.confirm(shell)
        if outcome.passed or time.monotonic() > deadline:
            return outcome
        time.sleep(0.1)


def _pin_order(fault: Fault) -> tuple[bool, int]:
    """Pinned faults first, lowest PID first: a pin below one already started is past."""
    if not fault.pins_pid():
        return (True, 0)
    pins = [getattr(fault.params, "pid", None), *(getattr(fault.params, "pids", None) or [])]
    return (False, min(p for p in pins if p is not None))


def inject_all(
    faults: Sequence[tuple[str, str, FaultParams]],
    shells: Mapping[str, Shell],
    seed: int,
    *,
    registry: Registry[Fault] = FAULTS,
    confirm_timeout: float = CONFIRM_TIMEOUT,
    on_injected: Callable[[], None] | None = None,
) -> list[InjectedFault]:
    """Inject ``(host, type, params)`` in order, then confirm each.

    Faults that pin a process to a fixed PID inject first: any other fault may
    fork (a failed MariaDB start forks dozens of times) and push the PID counter
    past the pinned PID. Each fault keeps its index (its seed stream, ``f<i>``).
    ``on_injected`` is called once every fault is in, before the confirmations
    (the Harbor export records the commands that broke the host up to there).
    Raises InvalidEpisode when a fault's symptom cannot be observed.
    """
    prepared = []
    for index, (host, fault_type, params) in enumerate(faults):
        fault, rng = registry.get(fault_type)(params), fault_rng(seed, index, fault_type)
        fault.prepare(shells[host], rng)
        prepared.append((fault, rng, host, fault_type))
    seeded_by_index: dict[int, dict[str, Any]] = {}
    for index in sorted(range(len(prepared)), key=lambda i: _pin_order(prepared[i][0])):
        fault, rng, host, fault_type = prepared[index]
        seeded_by_index[index] = seeded = fault.inject(shells[host], rng)
        if sorted(seeded) != sorted(fault.records):  # a template may name only what is declared
            declared = list(fault.records)
            raise FixOSError(f"fault type {fault_type} recorded {sorted(seeded)} but declares {declared}")
    applied = [(f, h, t, seeded_by_index[i]) for i, (f, _, h, t) in enumerate(prepared)]
    if on_injected is not None:
        on_injected()
    injected = []
    for fault, host, fault_type, seeded in applied:
        outcome = _confirm(fault, shells[host], confirm_timeout)
        if not outcome.passed:
            raise InvalidEpisode(f"fault {fault_type} on {host} could not be confirmed: {outcome.detail}")
        injected.append(
            InjectedFault(
                type=fault_type,
                host=host,
                params=fault.params.model_dump(),
                seeded=seeded,
                confirmation=outcome.detail,
            )
        )
    return injected


# The fault modules register their classes as they load; loading them here means
# whoever holds FAULTS holds every type. They import this module, hence the end.
from . import (  # noqa: E402, F401
    config,
    database,
    dependency,
    disk,
    housekeeping,
    limits,
    network,
    permissions,
    php,
    process,
    schedule,
    service,
    tables,
    tls,
)
