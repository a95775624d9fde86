"""Break a live host once and keep what a self-contained task needs to break it again.

The faults run on a real FixOS host through a ``CaptureShell``, which records
every command of their ``prepare`` and ``inject`` phases. Played back in the
same order on a freshly booted host of the same image, those commands build
the same broken world: whatever the faults drew from the seed (edits, sizes,
names, passwords) is already written into them. Processes that a fault starts
at "any" PID are pinned to a PID chosen here, so that the solution (which may
``kill`` them by PID) and the playback agree, and two exports agree byte for byte;
what the task runs against them looks them up by name too (``exporter.pids``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

import docker

from ..core.errors import InvalidEpisode
from ..core.models import CommandResult, InjectedFault
from ..episodes.inspection import inspected
from ..episodes.phases import break_hosts, check_entries, fault_entries
from ..injector.edit import parse_spawn, spawn_command
from ..scenarios.schema import Scenario
from ..scenarios.solution import render
from ..shells.base import Shell
from ..stack.hosts import Stack
from ..stack.images import ensure_image
from ..stack.tls import Validity
from ..verifier import CheckEntry
from .pids import located
from .tls import EXPORT_VALIDITY, SiteExport, about_https, read_site

FIRST_PINNED_PID = 1000
"""where PIDs the faults leave to chance start: above the named ones (909-922) and
above what a booted host has used by the time its faults go in."""
PID_STEP = 1000
"""room between two such PIDs for what the faults fork in between (a batch job's clients)."""


class PinMissed(InvalidEpisode):
    """A process a fault started at no particular PID did not get the one chosen for it:
    something else in the host forked in the instant between the climb and the spawn (its
    cron, a service's own loop). Nothing is wrong with the scenario: a fresh host gets it."""


class CaptureShell:
    """A Shell that records the commands run through it until ``stop`` and pins
    every process started at an unspecified PID to the next chosen one."""

    def __init__(self, inner: Shell, first_pid: int = FIRST_PINNED_PID) -> None:
        self._inner = inner
        self._next_pid = first_pid
        self.commands: list[str] = []
        self.recording = True

    def stop(self) -> None:
        self.recording = False

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        if not self.recording:
            return self._inner.run(command, timeout)
        spawn = parse_spawn(command)
        pinned = None
        if spawn and spawn[1] is None:
            pinned = self._next_pid
            command = spawn_command(spawn[0], pinned)
            timeout = max(timeout or 0, 60)
        # The replay starts the program even past its pin: its repair finds it by name.
        self.commands.append(spawn_command(spawn[0], spawn[1] or pinned, strict=False) if spawn else command)
        result = self._inner.run(command, timeout)
        if spawn and (spawn[1] or pinned) is not None:
            words = result.output.split()
            if pinned is not None and (result.exit_code != 0 or words[-1:] != [str(pinned)]):
                raise PinMissed(f"cannot pin {spawn[0]} to PID {pinned}: {result.output[-200:]}")
            if words and words[-1].isdigit():
                got = int(words[-1])
                self._next_pid = max(self._next_pid, (got // PID_STEP + 1) * PID_STEP)
        return result

    def close(self) -> None:
        self._inner.close()


@dataclass
class Capture:
    """One scenario x seed, broken once on a live host."""

    scenario: Scenario
    seed: int
    commands: dict[str, list[str]]
    """host -> what broke it, in order (prepare, then inject), as one session there ran them."""
    faults: list[InjectedFault]
    checks: list[CheckEntry]
    baseline: dict[str, Any]
    """what each check recorded on the healthy host, refined once the faults were in."""
    solution: str
    image_ids: dict[str, str] = field(default_factory=dict)
    sites: dict[str, SiteExport] = field(default_factory=dict)
    """host -> its healthy HTTPS, for a scenario about HTTPS (``exporter.tls``)."""


def capture(
    scenario: Scenario,
    seed: int,
    *,
    client: docker.DockerClient,
    images: dict[str, str],
    run_id: str,
    tls_validity: Validity = EXPORT_VALIDITY,
) -> Capture:
    """Boot the scenario's hosts and run the reset phases (fixos.episodes.phases) on them, the faults going
    in through a CaptureShell per host that records them."""
    names = [h.name for h in scenario.hosts]
    checks = check_entries(scenario)
    stack = Stack(
        client,
        run_id=run_id,
        episode_id=f"{run_id}-{scenario.slug}-s{seed}",
        hosts=scenario.hosts,
        images=images,
        tls_validity=tls_validity,
    )
    try:
        stack.up()
        # As in an episode: the checks look from inspectors (with SYS_PTRACE, as the
        # exported container has), the faults go in through the recorders around one
        # session in each host, so only their commands are kept.
        inspector = images.get("inspector") or ensure_image(client, "inspector", lambda line: None)
        with contextlib.ExitStack() as sessions:
            shells = {name: sessions.enter_context(stack.hosts[name].shell()) for name in names}
            recorders = {name: CaptureShell(shells[name]) for name in names}
            sites = {}
            for name in names if about_https(scenario, checks) else []:
                made = getattr(stack.hosts[name], "tls", None)  # set at stack up (fixos.stack.tls)
                if made is not None:
                    sites[name] = read_site(shells[name], name, made.ca_pem)
            broken = break_hosts(
                checks,
                fault_entries(scenario),
                seed,
                shells,
                {name: stack.hosts[name] for name in names},
                vantage=lambda patient: inspected(client, stack.hosts, inspector, patient=patient),
                inject_through=recorders,
                on_injected=lambda: [r.stop() for r in recorders.values()],
            )
        return Capture(
            scenario=scenario,
            seed=seed,
            commands={name: r.commands for name, r in recorders.items()},
            faults=broken.faults,
            checks=checks,
            baseline=broken.baseline,
            solution=render(scenario.solution, located(broken.faults)),
            image_ids=stack.image_ids(),
            sites=sites,
        )
    finally:
        stack.down()
