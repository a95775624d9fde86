"""Writing the pages into a run directory: after each record is journaled and when an episode
starts (so running ones show), and once more at the end. Each file is replaced whole (a
browser reloading it never reads half a page).

A page is a view: a failure to write it is kept and reported at the end, never raised into
a bench's worker, whose episode is already safe in the journal."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from ...bench.local import Events, Job
from ...core.models import Step
from ...records.failures import Failure
from ...records.models import EpisodeRecord
from ...records.rundir import RunDir
from ...records.saved import Journal
from .episode import render_episode
from .page import PAGE, Running, load_episode, load_run
from .run_table import render_run


def _replace(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


class PageWriter:
    """The pages of one run directory. ``instructions``: scenario id -> the scenario's
    instruction, for the episode pages (a scenario missing from it shows as not known)."""

    def __init__(self, directory: Path, instructions: Mapping[str, str] | None = None) -> None:
        self.directory = directory
        self.instructions = dict(instructions or {})
        self.error: str | None = None
        """the first failure to write a page, in one line; None while every write worked."""
        self._lock = threading.Lock()
        self._journal = Journal(EpisodeRecord, RunDir(directory.parent, directory.name).episodes)
        """the run's journal, parsed once line by line across the page's many writes."""

    @property
    def index(self) -> Path:
        return self.directory / PAGE

    def write(
        self, *, running: list[Running] | None = None, episodes: str = "missing", finished: bool = True
    ) -> Path:
        """The run's page, and the episode pages ``episodes`` says: ``missing`` (those not written
        yet), ``all``, or an episode id. Raises what writing raised (``write_quietly`` keeps it)."""
        with self._lock:
            page, run = load_run(
                self.directory, running=running or [], finished=finished, records=self._journal.read()
            )
            for record in page.records:
                target = self.directory / record.episode_id / PAGE
                wanted = episodes == "all" or episodes == record.episode_id
                if wanted or (episodes == "missing" and not target.exists()):
                    target.parent.mkdir(exist_ok=True)
                    _replace(target, render_episode(load_episode(run, record, self.instructions)))
            _replace(self.index, render_run(page))
        return self.index

    def write_quietly(
        self, *, running: list[Running] | None = None, episodes: str = "missing", finished: bool = True
    ) -> None:
        try:
            self.write(running=running, episodes=episodes, finished=finished)
        except Exception as exc:  # a view's failure: the journal already holds the episode
            if self.error is None:
                self.error = f"{type(exc).__name__}: {exc}"


class LivePage(Events):
    """Passes every event on to ``inner`` (the terminal's view), and keeps the run's page
    current: an episode shows as running from its start, with its result once journaled
    (``Bench`` calls ``finished`` after the journal line is written)."""

    def __init__(self, inner: Events, writer: PageWriter) -> None:
        self.inner, self.writer = inner, writer
        self._running: dict[str, Running] = {}
        self._lock = threading.Lock()

    def running(self) -> list[Running]:
        with self._lock:
            return list(self._running.values())

    def started(self, job: Job) -> None:
        self.inner.started(job)
        with self._lock:
            self._running[job.episode_id] = Running(
                job.episode_id, job.scenario, job.seed, job.agent, time.time()
            )
        self.writer.write_quietly(running=self.running(), finished=False)

    def step(self, job: Job, step: Step) -> None:
        self.inner.step(job, step)
        with self._lock:  # counted only: the page is rewritten at starts and ends, not per command
            known = self._running.get(job.episode_id)
            if known is not None:
                self._running[job.episode_id] = Running(
                    known.episode_id,
                    known.scenario,
                    known.seed,
                    known.agent,
                    known.started_at,
                    step.index + 1,
                )

    def finished(self, record: EpisodeRecord, retried: bool) -> None:
        self.inner.finished(record, retried)
        with self._lock:
            self._running.pop(record.episode_id, None)
        self.writer.write_quietly(running=self.running(), episodes=record.episode_id, finished=False)

    def retrying(self, job: Job, failure: Failure) -> None:
        self.inner.retrying(job, failure)
