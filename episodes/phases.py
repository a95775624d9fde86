"""The reset of booted hosts, once for everyone who breaks them: an episode, and the
exporter's capture of a Harbor task.

    healthy snapshot (every check must pass) -> inject the faults -> checks narrow
    their evidence -> confirm broken (some scored check must fail)

Either failed proof is an InvalidEpisode (UnhealthyHost for the first): a scenario
whose checks fail on a healthy host, or whose faults break nothing the score sees,
would measure nothing. A look at the hosts that breaks twice here is the harness's
failure (StackError): no agent has run yet.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from ..core.errors import InvalidEpisode, ShellError, StackError, UnhealthyHost
from ..core.models import InjectedFault, Verdict
from ..core.registry import Registry
from ..injector import FAULTS, Fault, inject_all
from ..scenarios.schema import Scenario
from ..scenarios.steady import SERVICE_DAEMONS
from ..shells.base import Shell
from ..verifier import CHECKS, Baseline, Check, CheckEntry, HostAccess, Probe, judge
from ..verifier.backend import testinfra_host
from ..verifier.config_tests import answered_before_faults
from .inspection import KILLED, Looking

T = TypeVar("T")
FaultEntry = tuple[str, str, Any]
"""(host, fault type, params): what the injector needs of a scenario's fault."""


def check_entries(scenario: Scenario) -> list[CheckEntry]:
    return [
        CheckEntry(c.name, c.type, scenario.host_of(c), c.scored, c.weight, c.params) for c in scenario.checks
    ]


def fault_entries(scenario: Scenario) -> list[FaultEntry]:
    return [(scenario.host_of(f), f.type, f.params) for f in scenario.faults]


def probes_of(
    shells: Mapping[str, Shell], hosts: Mapping[str, HostAccess], *, patient: bool
) -> dict[str, Probe]:
    """What the checks look through, per host: testinfra over a session in the host, and outside access."""
    return {
        name: Probe(testinfra_host(shell, name), shell, hosts[name], patient, world=hosts)
        for name, shell in shells.items()
    }


Vantage = Callable[[bool], AbstractContextManager[Looking]]
"""Opens the probes of one judgement (patient or not); closing them ends it."""


def in_host(shells: Mapping[str, Shell], hosts: Mapping[str, HostAccess]) -> Vantage:
    """Judging through sessions inside the hosts: the exporter's capture, whose
    baseline an in-host verifier (Harbor's contract) later compares against."""
    return lambda patient: contextlib.nullcontext(Looking(probes_of(shells, hosts, patient=patient)))


def _looked(look: Vantage, patient: bool, moment: str, judging: Callable[[Looking], T]) -> T:
    """``judging`` over one look at the hosts, before any agent ran; once more over a new
    look when the first broke. What breaks a look here cannot be an agent's doing (none has
    run): on a machine loaded past what the sessions' waits allow (64 resets at once on 2
    cores), a judge session may not answer in time. Twice is the harness's failure
    (StackError, like a host that did not boot), never the agent's nor the scenario's."""
    for _attempt in (1, 2):
        with look(patient) as looking:
            judged = judging(looking)
            disturbed = looking.disturbed()
        if not disturbed:
            return judged
    why = "; ".join(f"{host}: {reason.removeprefix(KILLED + ': ')}" for host, reason in disturbed.items())
    raise StackError(
        f"the verifier could not look at the {moment} hosts (twice, before any agent ran): {why}"
    )


class Remembered:
    """A host's outside access that asks the engine once per judgement for what changed
    (``docker diff``) and for each set of files: the confirmation's checks narrow their
    evidence and then judge, back to back, on hosts nobody touches in between, so the
    second look would read the same answer at the engine's cost (the largest share of a
    reset's time with several resets at once). Everything else goes to the host as is."""

    def __init__(self, access: HostAccess) -> None:
        self._access = access
        self._answers: dict[Any, Any] = {}

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._access, name)
        if name == "changes":
            return lambda: self._once(("changes",), found)
        if name == "read_files":
            return lambda paths: dict(self._once(("read_files", *paths), lambda: found(paths)))
        return found

    def _once(self, key: Any, ask: Callable[[], Any]) -> Any:
        if key not in self._answers:
            self._answers[key] = ask()
        return copy.deepcopy(self._answers[key])


@dataclass
class BrokenHosts:
    """What the reset leaves: the faults that went in and the evidence to judge the repair against."""

    faults: list[InjectedFault]
    healthy: Baseline
    """what the checks recorded on the healthy hosts (a pool caches it per scenario and image)."""
    baseline: Baseline
    """``healthy`` as the checks narrowed it once the faults were in: what the final verdict compares."""
    verdict: Verdict
    """the broken hosts' verdict: some scored check fails."""


def break_hosts(
    checks: Sequence[CheckEntry],
    faults: Sequence[FaultEntry],
    seed: int,
    shells: Mapping[str, Shell],
    hosts: Mapping[str, HostAccess],
    *,
    healthy: Baseline | None = None,
    vantage: Vantage | None = None,
    inject_through: Mapping[str, Shell] | None = None,
    on_injected: Callable[[], None] | None = None,
    on_confirmed: Callable[[], None] | None = None,
    check_types: Registry[Check] = CHECKS,
    fault_types: Registry[Fault] = FAULTS,
) -> BrokenHosts:
    """Record the healthy hosts, break them, and prove both states; InvalidEpisode when either proof fails.

    ``shells`` are the harness's sessions in the hosts, one per host; ``hosts`` the
    outside access to each. The checks look through ``vantage`` (an episode's
    inspectors), or through ``shells`` when none is given (the exporter's capture).
    ``healthy``, when given, is evidence already recorded and proven on identical
    hosts (a pool's cache, the disk's), so only the checks it lacks are recorded. The faults go
    in through ``inject_through`` (default: ``shells``); ``on_injected`` runs
    once all are in, before their confirmation (the capture stops recording
    there); ``on_confirmed`` once each is confirmed, before the broken hosts are
    recorded (an episode ends the harness's sessions there). The registries are for
    tests' own types.
    """
    look = vantage or in_host(shells, hosts)
    known = healthy or {}
    missing = [c for c in checks if c.name not in known]
    healthy = known if not missing else None
    if healthy is None:
        # Patient: a healthy page slow to answer on a loaded machine is asked again, not
        # taken for a broken host (which makes the episode invalid); patience costs nothing
        # when the host answers, and the hosts are healthy here.
        proof = _looked(
            look,
            True,
            "healthy",
            lambda looking: judge(missing, looking.probes, moment="healthy", registry=check_types),
        )
        if not all(c.passed for c in proof.verdict.checks):  # some may be gates only: no reward
            failing = "; ".join(f"{c.name}: {c.detail}" for c in proof.verdict.checks if not c.passed)
            raise UnhealthyHost(f"checks fail on the healthy host: {failing}")
        healthy = {**known, **proof.baseline}
    injected = inject_all(
        list(faults), inject_through or shells, seed, registry=fault_types, on_injected=on_injected
    )
    if on_confirmed is not None:
        on_confirmed()

    # judge() narrows a copy: the healthy evidence stays as recorded, for a pool to reuse.
    def confirm(looking: Looking) -> Any:
        probes = {name: replace(p, access=Remembered(p.access)) for name, p in looking.probes.items()}
        return judge(checks, probes, copy.deepcopy(healthy), moment="broken", registry=check_types)

    broken = _looked(look, False, "broken", confirm)
    if not faults:  # a control: nothing broken, so every check passes as the agent finds it
        failing = [f"{c.name}: {c.detail}" for c in broken.verdict.checks if not c.passed]
        if failing:
            raise UnhealthyHost("a fault-free world fails before the agent: " + "; ".join(failing))
    elif broken.verdict.solved:
        raise InvalidEpisode("the injected faults left every scored check passing")
    return BrokenHosts(injected, healthy, broken.baseline, broken.verdict)


def tests_before_faults(
    hosts: Mapping[str, HostAccess], shells: Mapping[str, Shell], services: Mapping[str, Sequence[str]]
) -> dict[str, dict[str, Any]]:
    """Per host, the daemons' config tests its harness session answers before any fault or
    agent touched it (``fixos.verifier.config_tests.answered_before_faults``): an engine
    exec spared at the reset's judgement, where the configuration was left as it booted."""
    found = {}
    for name, shell in shells.items():
        daemons = [SERVICE_DAEMONS[s] for s in services.get(name, ()) if s in SERVICE_DAEMONS]
        entries = answered_before_faults(getattr(hosts[name], "facts", lambda: None), shell, daemons)
        if entries:
            found[name] = entries
    return found


def end_sessions(shells: Mapping[str, Shell]) -> None:
    """Close the harness's sessions and wait until each one's shell has exited: the faults'
    processes it started are then init's children, as a server's own daemons are. Left
    open through the agent's turn, ``ps --forest`` showed them under a session no healthy
    server has, which named them as the faults' without any diagnosis (hard_1's hog was
    the only program under it). A session whose shell does not end is the harness's
    failure (StackError): no agent has run yet."""
    for shell in shells.values():  # every stdin closed first: the shells end side by side
        shell.close()
    for name, shell in shells.items():
        end = getattr(shell, "end", None)  # an engine's session; a test's fake has nothing to wait for
        if end is None:
            continue
        try:
            end()
        except ShellError as exc:
            raise StackError(f"the harness's session on {name} did not end: {exc}") from None
