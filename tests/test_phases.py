"""The reset phases on a made-up host (no container): healthy proof, injection, narrowed
evidence, broken proof, and the ways a reset is refused (a host unhealthy before any
fault, faults that leave every scored check passing, a look that breaks twice)."""

from __future__ import annotations

import contextlib
import random
from typing import Any

import pytest

from fixos.core.errors import InvalidEpisode, StackError, UnhealthyHost
from fixos.core.models import HttpResponse, Outcome
from fixos.core.registry import Registry
from fixos.episodes.inspection import KILLED, Looking
from fixos.episodes.phases import break_hosts
from fixos.injector import Fault
from fixos.shells import FakeShell
from fixos.shells.base import Shell
from fixos.shells.watched import WatchedShell
from fixos.verifier import Check, CheckEntry, Probe, judge
from fixos.verifier.base import CheckParams


class World:
    """One host's state, changed and read by shell commands."""

    def __init__(self, page: str = "ok") -> None:
        self.page = page
        self.order: list[str] = []

    def handle(self, command: str) -> str:
        self.order.append(command)
        if command == "break":
            self.page = "broken"
        return self.page


class PageOk(Check):
    type = "page_ok"

    def snapshot(self, probe: Probe) -> Any:
        return {"seen": probe.shell.run("read").output}

    def refine(self, probe: Probe, baseline: Any) -> Any:
        baseline["refined"] = True  # in place, on purpose: the healthy evidence must not change
        return baseline

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        page = probe.shell.run("read").output
        return Outcome(page == baseline["seen"], page)


class Breaks(Fault):
    type = "breaks"

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        shell.run("break")
        return {}

    def confirm(self, shell: Shell) -> Outcome:
        return Outcome(True, "broken")


class Harmless(Breaks):
    type = "harmless"

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        shell.run("noop")
        return {}


class Outside:
    name = "web"

    def http_get(self, port: int, path: str, timeout: float = 5.0) -> HttpResponse:
        return HttpResponse(0, b"")

    def read_file(self, path: str) -> bytes | None:
        return None


CHECKS = [CheckEntry("page", "page_ok", "web", True, 1.0, CheckParams())]
CHECK_TYPES: Registry[Check] = Registry("check type", [PageOk])
FAULT_TYPES: Registry[Fault] = Registry("fault type", [Breaks, Harmless])


def _break(world: World, fault: str = "breaks", **kwargs: Any):
    return break_hosts(
        CHECKS,
        [("web", fault, Fault.Params())],
        1,
        {"web": FakeShell(world.handle)},
        {"web": Outside()},
        check_types=CHECK_TYPES,
        fault_types=FAULT_TYPES,
        **kwargs,
    )


def test_a_reset_records_the_healthy_host_breaks_it_and_proves_it_broken() -> None:
    world = World()
    recorder = FakeShell(world.handle)
    injected_at: list[int] = []
    broken = _break(
        world, inject_through={"web": recorder}, on_injected=lambda: injected_at.append(len(world.order))
    )
    assert [f.type for f in broken.faults] == ["breaks"]
    assert recorder.commands == ["break"]  # the faults went in through the recorder, and only they
    assert world.order.index("break") == injected_at[0] - 1
    assert broken.healthy == {"page": {"seen": "ok"}}  # as recorded: the narrowing worked on a copy
    assert broken.baseline == {"page": {"seen": "ok", "refined": True}}
    assert broken.verdict.reward == 0.0 and not broken.verdict.solved
    probes = {"web": Probe(None, FakeShell(World().handle), Outside())}  # type: ignore[arg-type]
    repaired = judge(CHECKS, probes, broken.baseline, registry=CHECK_TYPES)
    assert repaired.verdict.reward == 1.0


def test_a_host_failing_its_checks_before_any_fault_is_refused() -> None:
    # the snapshot records "ok"; the check then sees "sick" (the page flips after the first read)
    class Flaky(World):
        def handle(self, command: str) -> str:
            answer = super().handle(command)
            self.page = "sick"
            return answer

    world = Flaky()
    with pytest.raises(UnhealthyHost, match="checks fail on the healthy host: page: sick"):
        _break(world)
    assert "break" not in world.order  # refused before any fault went in


def test_faults_that_leave_every_scored_check_passing_are_refused() -> None:
    with pytest.raises(InvalidEpisode, match="left every scored check passing"):
        _break(World(), fault="harmless")


def test_a_proven_healthy_baseline_skips_the_snapshot() -> None:
    world = World()
    cached = {"page": {"seen": "ok"}}
    broken = _break(world, healthy=cached)
    assert world.order.count("read") == 1  # only the broken verdict read the page
    assert broken.healthy is cached and cached == {"page": {"seen": "ok"}}
    assert broken.baseline == {"page": {"seen": "ok", "refined": True}}


class BreakingLooks:
    """A vantage whose first ``breaks`` looks break (a session that did not answer in time)."""

    def __init__(self, world: World, breaks: int) -> None:
        self.world, self.breaks, self.looks = world, breaks, 0

    @contextlib.contextmanager
    def __call__(self, patient: bool):
        self.looks += 1
        error = f"{KILLED}: shell did not answer in 15s" if self.looks <= self.breaks else None
        shell = WatchedShell(FakeShell(self.world.handle), error)
        yield Looking({"web": Probe(None, shell, Outside(), patient)}, {"web": shell})  # type: ignore[arg-type]


def test_a_look_that_breaks_at_reset_is_taken_again() -> None:
    world = World()
    looks = BreakingLooks(world, breaks=1)
    broken = _break(world, vantage=looks)
    assert looks.looks == 3  # healthy: broke, then again; broken: once
    assert broken.verdict.reward == 0.0


def test_a_look_that_breaks_twice_at_reset_is_the_harness_failure_never_the_agents() -> None:
    looks = BreakingLooks(World(), breaks=2)
    with pytest.raises(
        StackError, match=r"healthy hosts \(twice, before any agent ran\): web: shell did not"
    ) as err:
        _break(World(), vantage=looks)
    assert KILLED not in str(err.value) and not isinstance(err.value, InvalidEpisode)
