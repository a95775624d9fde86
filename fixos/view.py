"""What a person watching a bench sees: a live board on a terminal, one line per
episode elsewhere (CI logs)."""

from __future__ import annotations

import threading
import time

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from fixos.bench import Events, Job
from fixos.models import EpisodeRecord, Step


def outcome_line(record: EpisodeRecord, retried: bool = False) -> str:
    t = record.timings
    score = "invalid" if record.status != "scored" else f"{record.reward:.2f}"
    line = (
        f"{record.episode_id}: {score} · reset {t.reset:.2f}s · {record.steps} step(s) · "
        f"agent {t.agent:.1f}s · verify {t.verify:.2f}s"
    )
    if retried:
        line += " · retried once"
    if record.error:
        line += f" · {record.error}"
    return line


class PlainView(Events):
    def __init__(self, console: Console, total: int) -> None:
        self.console, self.total, self.done = console, total, 0
        self._lock = threading.Lock()

    def finished(self, record: EpisodeRecord, retried: bool) -> None:
        with self._lock:
            self.done += 1
            self.console.print(
                f"[{self.done}/{self.total}] {escape(outcome_line(record, retried))}", highlight=False
            )


class LiveView(Events):
    """Overall progress with ETA, a line per running episode, and finished ones above."""

    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("bench"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=console,
        )
        self.task = self.progress.add_task("bench", total=total)
        self.running: dict[str, tuple[Job, float, int]] = {}
        self._lock = threading.Lock()
        self.live = Live(Group(self.progress, self), console=console, refresh_per_second=4, transient=False)

    def __rich__(self) -> Table:
        table = Table.grid(padding=(0, 2))
        with self._lock:
            for job, started, steps in self.running.values():
                table.add_row(
                    escape(job.scenario),
                    escape(job.agent),
                    f"seed {job.seed}",
                    f"step {steps}",
                    f"{time.monotonic() - started:.0f}s",
                )
        return table

    def started(self, job: Job) -> None:
        with self._lock:
            self.running[job.episode_id] = (job, time.monotonic(), 0)

    def step(self, job: Job, step: Step) -> None:
        with self._lock:
            if job.episode_id in self.running:
                j, started, _ = self.running[job.episode_id]
                self.running[job.episode_id] = (j, started, step.index + 1)

    def finished(self, record: EpisodeRecord, retried: bool) -> None:
        with self._lock:
            self.running.pop(record.episode_id, None)
        self.live.console.print(escape(outcome_line(record, retried)), highlight=False)
        self.progress.advance(self.task)

    def __enter__(self) -> LiveView:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(*exc)
