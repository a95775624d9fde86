"""Many episodes: a plan of scenario x seed x agent jobs, run in parallel, each
result made durable as it ends, so an interrupted run resumes where it stopped."""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from docker.errors import DockerException
from pydantic import ConfigDict

from ..core.errors import FixOSError
from ..core.models import Step
from ..episodes.episode import STOPPED, episode_id_for, run_episode
from ..records.failures import EpisodeStatus, Failure, FailureKind, retry_wanted
from ..records.models import EpisodeRecord
from ..records.rundir import RunDir, write_interrupted
from ..records.saved import Saved, read_model, write_model
from ..scenarios.schema import Scenario
from ..shells.stopping import watch
from ..stack.engine import Engine, shares
from ..stack.leftovers import remove_labelled
from ..stack.pool import HostPool

MEMORY_PER_EPISODE = 640 * 1024 * 1024
"""what one live host may use (its cap), for sizing -j to the machine."""


def default_parallelism() -> int:
    """As many episodes as both the cores and the free memory can hold."""
    cores = os.cpu_count() or 1
    try:
        with open("/proc/meminfo") as f:
            info = dict(line.split(":", 1) for line in f)
        available = int(info["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return max(1, cores)
    return max(1, min(cores, available // MEMORY_PER_EPISODE))


@dataclass(frozen=True)
class Job:
    scenario: str
    seed: int
    agent: str

    @property
    def episode_id(self) -> str:
        return episode_id_for(self.scenario, self.seed, self.agent)


class Plan(Saved):
    """What a run is to do: plan.json, which ``--resume`` reads back."""

    model_config = ConfigDict(frozen=True)

    scenarios: list[str]
    seeds: list[int]
    agents: list[str]
    transport: Literal["exec", "ssh"] = "exec"
    task: Literal["repair", "diagnose", "localise", "detect"] = "repair"
    """the task level of every episode (``fixos.episodes.tasks``)."""
    shard: tuple[int, int] | None = None
    """(i, n): only every n-th job, starting at the i-th (1-based)."""

    def jobs(self) -> list[Job]:
        every = [Job(s, seed, a) for s in self.scenarios for seed in self.seeds for a in self.agents]
        if self.shard is None:
            return every
        i, n = self.shard
        return [job for k, job in enumerate(every) if k % n == i - 1]

    def save(self, run: RunDir) -> None:
        write_model(run.path / "plan.json", self)

    @classmethod
    def load(cls, run: RunDir) -> Plan:
        path = run.path / "plan.json"
        if not path.exists():
            raise FixOSError(f"{path} is missing: cannot resume run {run.run_id}")
        return read_model(cls, path)


def parse_shard(text: str) -> tuple[int, int]:
    i, _, n = text.partition("/")
    if not (i.isdigit() and n.isdigit()) or not 1 <= int(i) <= int(n):
        raise ValueError(f"--shard must look like 1/4 (got {text!r})")
    return int(i), int(n)


class Events:
    """What the live view hears; every method may be called from worker threads."""

    def started(self, job: Job) -> None: ...

    def step(self, job: Job, step: Step) -> None: ...

    def finished(self, record: EpisodeRecord, retried: bool) -> None: ...

    def retrying(self, job: Job, failure: Failure) -> None:
        """The harness failed the episode (``failure``); it runs once more on a fresh host."""


class Bench:
    """Runs a plan's jobs over one or more engines, ``parallel`` at a time in all.

    Each engine gets its share of ``parallel`` and a pool of warm hosts of that
    size, so an episode's reset does not wait for a boot (``warm=False``: every
    episode boots its own hosts, as `fixos run` on a cold engine would).
    """

    def __init__(
        self,
        plan: Plan,
        run: RunDir,
        catalog: dict[str, Scenario],
        *,
        engines: Sequence[Engine],
        parallel: int,
        events: Events | None = None,
        warm: bool = True,
    ) -> None:
        if not engines:
            raise FixOSError("a bench needs at least one engine")
        self.plan, self.run, self.catalog = plan, run, catalog
        self.engines = list(engines)
        self.parallel = parallel
        self.warm = warm
        self.events = events or Events()
        self._write = threading.Lock()
        self._stop = threading.Event()
        self._slots: queue.Queue[int] = queue.Queue()
        for index, share in enumerate(shares(parallel, len(self.engines))):
            for _ in range(share):
                self._slots.put(index)
        self._pools: list[HostPool | None] = [None] * len(self.engines)

    def pending(self) -> list[Job]:
        done = {r.episode_id for r in self.run.records()}
        return [job for job in self.plan.jobs() if job.episode_id not in done]

    def records(self) -> list[EpisodeRecord]:
        return self.run.records()

    def _episode(self, job: Job) -> None:
        slot = self._slots.get()  # an engine with room; there is one per running worker
        try:
            self._episode_on(self.engines[slot], self._pools[slot], job)
        finally:
            self._slots.put(slot)

    def _episode_on(self, engine: Engine, pool: HostPool | None, job: Job) -> None:
        retried = False
        while True:
            if self._stop.is_set():
                return
            self.events.started(job)
            record, steps = run_episode(
                self.catalog[job.scenario],
                job.seed,
                job.agent,
                client=engine.client,
                images=engine.images,
                run_id=self.run.run_id,
                transport=self.plan.transport,
                task=self.plan.task,
                workdir=self.run.episode_dir(job.episode_id),
                on_step=lambda step, job=job: self.events.step(job, step),
                pool=pool,
            )
            if len(self.engines) > 1:
                record.engine = engine.url
            # the failure table says which failures are worth a second run (never the agent's)
            if retry_wanted(record.failure) and not retried and not self._stop.is_set():
                retried = True
                assert record.failure is not None
                self.events.retrying(job, record.failure)
                continue
            break
        if self._stop.is_set():  # torn down under it: whatever it says, not a result
            record.fail(Failure(kind=FailureKind.interrupted, detail=STOPPED))
        if record.status is EpisodeStatus.interrupted:
            # on disk beside its transcript, but not in the journal, so --resume runs it again
            write_interrupted(self.run.episode_dir(job.episode_id), record, steps)
            return
        with self._write:
            self.run.write_episode(record, steps)
        self.events.finished(record, retried)

    def _open_pools(self, todo: Sequence[Job]) -> None:
        if not self.warm or not todo:
            return
        planned = [self.catalog[j.scenario].hosts for j in todo]
        split = shares(self.parallel, len(self.engines))
        for index, (engine, share) in enumerate(zip(self.engines, split, strict=True)):
            if share:
                # each engine's pool plans for the whole run: which jobs it gets is decided as slots free up
                self._pools[index] = HostPool(
                    engine.client, engine.images, run_id=self.run.run_id, size=share, planned=planned
                )

    def _close_pools(self) -> None:
        for pool in self._pools:
            if pool is not None:
                pool.close()
        self._pools = [None] * len(self.engines)

    def execute(self, jobs: Sequence[Job] | None = None) -> None:
        """Run the pending jobs; on Ctrl-C stop starting new ones and remove every container."""
        todo = list(self.pending() if jobs is None else jobs)
        # Each worker watches the stop event: an agent waiting for a human, a model or its
        # next command gives up within a poll, so shutdown(wait=True) returns in seconds.
        workers = ThreadPoolExecutor(
            max_workers=self.parallel, thread_name_prefix="episode", initializer=watch, initargs=(self._stop,)
        )
        futures: set[Future] = set()
        try:
            self._open_pools(todo)
            for job in todo:
                futures.add(workers.submit(self._episode, job))
                if len(futures) >= self.parallel:
                    finished, futures = wait(futures, return_when=FIRST_COMPLETED)
                    for f in finished:
                        f.result()
            for f in futures:
                f.result()
        except BaseException:
            self._stop.set()
            for f in futures:
                f.cancel()
            self._remove_all(stopping=True)
            raise
        finally:
            workers.shutdown(wait=True, cancel_futures=True)
            self._close_pools()
            self._remove_all(stopping=self._stop.is_set())

    def _remove_all(self, *, stopping: bool = False) -> None:
        """Remove the run's containers. When stopping, the workers' own teardown races this one
        (the engine answers 409, removal already in progress): try again, and never let the
        engine's answer replace the Ctrl-C being handled."""
        for engine in self.engines:
            for attempt in range(3):
                try:
                    remove_labelled(engine.client, run_id=self.run.run_id)
                    break
                except DockerException:
                    if attempt == 2:
                        if stopping:
                            break
                        raise
                    time.sleep(0.5)


def bench_path(results: Path, run_id: str) -> RunDir:
    if not (results / run_id).is_dir():
        raise FixOSError(f"no run {run_id!r} under {results}/")
    return RunDir(results, run_id)
