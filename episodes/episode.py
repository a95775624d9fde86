"""One episode as short named phases: boot, record the healthy host, inject and
confirm, let the agent work, verify, and always tear down.

``Episode`` is also the Python API for agent authors::

    with Episode(scenario, seed=3, client=client, images=images) as ep:
        ep.shell.run("ps aux")          # on the login host; ep.shell("db") on another
        verdict = ep.verify()
"""

from __future__ import annotations

import contextlib
import functools
import re
import secrets
import statistics
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

import docker

from ..agents import Task, make_agent
from ..core.errors import BudgetExhausted, FixOSError, ShellError, StackError
from ..core.models import InjectedFault, Step, Verdict
from ..diagnosis.truth import truth_report, truths
from ..injector.conflicts import kept_down_by_returning
from ..injector.families import families_of
from ..records.baselines import BaselineStore
from ..records.failures import EpisodeStatus, Failure, FailureKind, agent_failure, harness_failure
from ..records.models import EpisodeRecord, Timings
from ..records.rundir import write_interrupted
from ..scenarios.schema import Scenario
from ..scenarios.worlds import reference_scripts
from ..shells.base import Shell
from ..shells.recording import RecordingShell
from ..stack.disk_diff import DiskTrail
from ..stack.hosts import LiveHost, Stack
from ..stack.inspector import IMAGE_NAME
from ..stack.judge import Judge
from ..stack.pool import HostPool
from ..verifier import Baseline, judge
from ..verifier.exits import dying_of, wait_for_exits
from . import tasks
from .agent_shells import AgentShells, endpoints_of
from .blame import final_verdict
from .diagnosed import diagnosed
from .durability import PhaseTimes, durable_verdict
from .inspection import JudgeSessions, Looking, failing_disturbed, vantage
from .phases import break_hosts, check_entries, fault_entries, tests_before_faults


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class Episode:
    def __init__(
        self,
        scenario: Scenario,
        seed: int,
        *,
        client: docker.DockerClient,
        images: dict[str, str],
        run_id: str | None = None,
        episode_id: str | None = None,
        transport: str = "exec",
        pool: HostPool | None = None,
        task: str = tasks.REPAIR,
    ) -> None:
        if transport not in ("exec", "ssh"):
            raise FixOSError(f"transport must be exec or ssh (got {transport!r})")
        if pool is not None and run_id not in (None, pool.run_id):
            raise FixOSError(f"run {run_id!r} cannot take hosts from the pool of run {pool.run_id!r}")
        self.transport = transport
        self.task = tasks.task_level(task)
        self.scenario = scenario
        self.seed = seed
        self.pool = pool
        self.run_id = run_id or (pool.run_id if pool else new_run_id())
        self.episode_id = episode_id or f"{scenario.slug}-s{seed}"
        self.stack = Stack(
            client,
            run_id=self.run_id,
            episode_id=f"{self.run_id}-{self.episode_id}",
            hosts=scenario.hosts,
            images=images,
        )
        self._client = client
        self._images = images
        self._own_judge: Judge | None = None  # without a pool (a pool's judge serves all)
        self._sessions: JudgeSessions | None = None  # kept from one judgement to the next
        self._store = BaselineStore()
        self.timings = Timings()
        self.verify_times = PhaseTimes()
        """where the last final verdict's time went (judged as left, restarts, judged again)."""
        self.faults: list[InjectedFault] = []
        self._baseline: Baseline = {}
        self.broken_verdict: Verdict | None = None
        """the verdict that confirmed the reset's faults (some scored check failing): the
        running score at step 0, judged already, so a caller need not judge again."""
        self._shell = AgentShells(lambda: self.stack.hosts, scenario.login_host, transport)
        self.disk = DiskTrail()  # the hosts' upper directories read healthy, confirmed, as left
        self._harness: dict[str, Shell] = {}  # per host, for the faults; never to judge (``.inspection``)
        self._early: dict[str, dict[str, Any]] = {}  # the config tests answered before the faults
        self._checks = check_entries(scenario)
        self.as_found = tasks.leaves_as_found(self.task, len(scenario.faults))
        """whether the host must be left as the agent found it (``fixos.episodes.tasks``)."""
        if self.as_found:
            self._checks += tasks.untouched_entries(scenario)

    # -- phases -----------------------------------------------------------

    def reset(self) -> None:
        """Boot hosts (or take warm ones), record them healthy, break them, confirm they are broken."""
        with self.pool.resetting() if self.pool is not None else contextlib.nullcontext():
            self._reset()

    def _reset(self) -> None:
        started = time.monotonic()
        if self.pool is not None:
            self.stack = self.pool.take(self.scenario.hosts, self.episode_id)
        else:
            self.stack.up()
        self.timings.boot = time.monotonic() - started
        self.disk.healthy(self.stack.hosts)
        # One harness session per host, never handed to the agent: the faults go in through it.
        self._harness.update(self.stack.take_shells())
        self._early = tests_before_faults(self.stack.hosts, self._harness, self._services())
        keys, cached = self._cached_healthy()
        broken = break_hosts(
            self._checks,
            fault_entries(self.scenario),
            self.seed,
            self._harness_shells(),
            self.stack.hosts,
            healthy=cached,
            vantage=self._inspected,
            on_confirmed=lambda: self._shell.succeed(self._harness, self._client.api),  # resets open new
        )
        self._store.keep(keys, broken.healthy, self.pool.baselines if self.pool is not None else None)
        self.faults = broken.faults
        self._baseline = broken.baseline
        self.broken_verdict = broken.verdict
        self.disk.confirmed(self.stack.hosts)
        self.timings.reset = time.monotonic() - started

    def _cached_healthy(self) -> tuple[dict[str, str], Baseline]:
        """The healthy evidence already recorded for these checks, hosts and images (in the
        pool's memory, or on disk: ``fixos.records.baselines``), and each check's key."""
        checks = [(c.name, c.type, c.host, c.params) for c in self._checks]
        memory = self.pool.baselines if self.pool is not None else None
        return self._store.find(checks, self.scenario.hosts, self.stack.image_ids(), memory)

    @property
    def shell(self) -> AgentShells:
        """The agent's session on the login host (opened on first use); ``shell(host)`` is
        its session on another host of the scenario."""
        return self._shell

    @property
    def host(self) -> LiveHost:
        """The scenario's login host, where the agent works (the first host unless ``login`` says)."""
        return self.stack.hosts[self.scenario.login_host]

    def verify(self) -> Verdict:
        """Judge the hosts from the judge (never the agent's session, nor a program in the
        hosts) once what the agent killed has exited (verifier.exits). Final: judged as
        left, then again once every service restarted (``fixos.episodes.durability``)."""
        started = time.monotonic()
        # what the agent left running is judged once init adopts it (nothing_new_running)
        self._shell.close()
        if self.as_found:  # nothing may have changed: no restart to survive (``.tasks``)
            judged = self._judge(patient=True, settles=tasks.gates_settle(self.task))
            verdict = tasks.as_found_verdict(judged, self.broken_verdict, self.task)
            self.timings.verify = self.verify_times.as_left = time.monotonic() - started
            return verdict
        verdict = durable_verdict(
            lambda holding, decided: self._judge(patient=True, holding=holding, skip=decided),
            self.stack.hosts,
            self._services(),
            times=self.verify_times,
            acted_on=kept_down_by_returning(
                [(self.scenario.host_of(f), f.type, f.params) for f in self.scenario.faults]
            ),
        )
        self.timings.verify = time.monotonic() - started
        return verdict

    def _services(self) -> dict[str, list[str]]:
        """Per host, the services its healthy self ran (the boot waited for each)."""
        return {spec.name: list(spec.services) for spec in self.scenario.hosts}

    def progress(self) -> Verdict:
        """Judge the hosts now without waiting out any check's hold period: the
        running score an environment shows after each step (``verify`` is final)."""
        return self._judge(patient=False)

    def close(self) -> None:
        try:
            if self._sessions is not None:
                self._sessions.close()
            for shell in [self._shell, *self._harness.values()]:
                with contextlib.suppress(Exception):
                    shell.close()
            self._harness.clear()
        finally:
            if self.pool is not None:
                self.pool.discard(self.stack)  # removed in the background, off the episode's clock
            else:
                self.stack.down()
            if self._own_judge is not None:
                self._own_judge.close()

    def __enter__(self) -> Episode:
        try:
            self.reset()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ----------------------------------------------------------

    def _harness_shells(self) -> dict[str, Shell]:
        """The harness's session on each host, replaced by a fresh one where it no
        longer answers as itself (the agent may kill, stop or take over processes)."""
        for name, host in self.stack.hosts.items():
            shell = self._harness.get(name)
            if shell is not None:
                token = secrets.token_hex(8)
                with contextlib.suppress(ShellError):
                    answer = shell.run(f"builtin echo {token}", timeout=5)
                    if answer.ok and answer.output.strip() == token:
                        continue
                with contextlib.suppress(Exception):
                    shell.close()
            self._harness[name] = host.shell()
        return dict(self._harness)

    def _inspected(self, patient: bool) -> AbstractContextManager[Looking]:
        """The vantage point of one judgement (``fixos.episodes.inspection.vantage``): the pool's judge,
        or the episode's own when it has no pool."""
        image = self._images.get(IMAGE_NAME)
        if image is None:
            raise StackError(f"no {IMAGE_NAME!r} image among {sorted(self._images)}: build it first")
        if self.pool is None and self._own_judge is None:
            self._own_judge = Judge(self._client, image, run_id=self.run_id)
        judge = self.pool.judge if self.pool is not None else self._own_judge
        self._sessions = JudgeSessions.kept(self._sessions, judge, self.stack.hosts, self._early)
        return vantage(self._client, self.stack.hosts, image, judge, patient=patient, sessions=self._sessions)

    def _judge(
        self, *, patient: bool, holding: bool = True, settles: bool = True, skip: frozenset[str] = frozenset()
    ) -> Verdict:
        """``settles``: whether a failed gate may cut the other checks' waits (``tasks.gates_settle``);
        ``skip``: the names of checks already decided (``durable_verdict``)."""
        entries = [entry for entry in self._checks if entry.name not in skip]
        with self._inspected(patient) as looking:
            for probe in looking.probes.values():
                probe.holding = holding
            if patient:
                wait_for_exits({name: functools.partial(dying_of, p) for name, p in looking.probes.items()})
            found = judge(entries, looking.probes, self._baseline, workers=looking.workers, settles=settles)
            return failing_disturbed(found.verdict, entries, looking.disturbed())


def episode_id_for(scenario_id: str, seed: int, agent_name: str) -> str:
    # a generated id's colons (gen:3:7) are no container or file name's
    return f"{scenario_id.replace(':', '-')}-s{seed}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', agent_name)}"


def run_episode(
    scenario: Scenario,
    seed: int,
    agent_name: str,
    *,
    client: docker.DockerClient,
    images: dict[str, str],
    run_id: str,
    transport: str = "exec",
    workdir: Path | None = None,
    on_step: Callable[[Step], None] | None = None,
    pool: HostPool | None = None,
    task: str = tasks.REPAIR,
) -> tuple[EpisodeRecord, list[Step]]:
    """Run one episode to its record; harness failures give an ``invalid`` record, not a score.
    Once the agent has the host, what it does there (its shell killed, bash removed, a fork
    bomb, a full disk, the host halted) is scored: only the engine's own evidence
    (``fixos.episodes.blame``) makes such an episode invalid."""
    episode_id = episode_id_for(scenario.id, seed, agent_name)
    record = EpisodeRecord(
        run_id=run_id,
        episode_id=episode_id,
        scenario=scenario.id,
        difficulty=scenario.difficulty,
        seed=seed,
        agent=agent_name,
        families=families_of(scenario.fault_types) or ([] if scenario.faults else [tasks.CONTROL]),
        status=EpisodeStatus.invalid,
        reward=None,
        solved=False,
        steps=0,
        timings=Timings(),
        task=tasks.task_level(task),
        control=not scenario.faults,
    )
    steps: list[Step] = []
    episode = Episode(
        scenario,
        seed,
        client=client,
        images=images,
        run_id=run_id,
        episode_id=episode_id,
        transport=transport,
        pool=pool,
        task=task,
    )
    record.timings = episode.timings
    try:
        episode.reset()
        record.faults = episode.faults
        record.images = episode.stack.image_ids()
        agent = make_agent(
            agent_name,
            solutions=reference_scripts(scenario, episode.faults),
            truth=truth_report(truths(episode.faults)),
        )
        limits = scenario.limits
        instruction = tasks.instruction_for(episode.task, scenario.instruction)
        task = Task(
            scenario.id, instruction, limits.max_steps, limits.wall_seconds, workdir, level=episode.task
        )
        if getattr(agent, "wants_endpoints", False):
            others = [h.name for h in scenario.hosts if h.name != scenario.login_host]
            task = replace(task, endpoints=endpoints_of(episode.host, workdir, others))
        shell = RecordingShell(
            episode.shell,
            max_steps=limits.max_steps,
            wall_seconds=limits.wall_seconds,
            command_timeout=limits.command_timeout,
            on_step=on_step,
        )
        steps = shell.steps
        started = time.monotonic()
        try:
            agent.solve(task, shell)
        except BudgetExhausted:
            pass
        except StackError:
            raise
        except Exception as exc:  # its own bug, or its session lost (a ShellError): judged as left
            record.failure = agent_failure(exc)
        episode.timings.agent = time.monotonic() - started
        record.disk = episode.disk.left(episode.stack.hosts)  # before the restarts write
        verdict = final_verdict(
            episode.verify, client, [h.handle.container_id for h in episode.stack.hosts.values()], record
        )
        record.status = EpisodeStatus.scored
        record.verdict = verdict
        record.reward = verdict.reward
        record.solved = verdict.solved
        record.diagnosis = diagnosed(agent, workdir, episode.faults, episode.task)
        if episode.task in tasks.REPORT_ONLY:
            record.reward = tasks.report_reward(verdict, record.diagnosis.score)
            record.solved = record.reward == 1.0
        finish = getattr(agent, "finish", None)
        if finish is not None:
            finish(verdict)
    except Exception as exc:  # the harness's failure (even its bug) must not end a long bench: record it
        record.fail(harness_failure(exc))
    except KeyboardInterrupt:  # Ctrl-C, SIGTERM, or the bench stopping this worker: on disk, then unwind
        record.fail(Failure(kind=FailureKind.interrupted, detail=STOPPED))
        _account(record, steps)
        if workdir is not None:
            write_interrupted(workdir, record, steps)
        raise
    finally:
        episode.close()
    _account(record, steps)
    return record, steps


STOPPED = "stopped (Ctrl-C or SIGTERM) while it ran"


def _account(record: EpisodeRecord, steps: list[Step]) -> None:
    record.steps = len(steps)
    if steps:
        record.timings.step_mean = statistics.fmean(s.duration for s in steps)
