"""What a person sees: tables of scenarios, verdicts and results, transcripts, and
while a bench runs a live board on a terminal or one line per episode elsewhere
(CI logs). Functions here return renderables; the CLI prints them."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

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
from rich.text import Text

from ..bench.local import Events, Job
from ..bench.validate import Validation, meets
from ..core.models import Step
from ..records.failures import Failure
from ..records.models import EpisodeRecord
from ..records.report import dash
from ..records.rundir import read_interrupted, read_reward, read_transcript
from ..records.summary import Stats, Summary
from ..scenarios.schema import Scenario
from .html.compare import Comparison


def outcome_line(record: EpisodeRecord, retried: bool = False) -> str:
    t = record.timings
    score = f"{record.reward:.2f}" if record.scored else str(record.status)
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

    def retrying(self, job: Job, failure: Failure) -> None:
        self.console.print(
            f"{job.episode_id}: the harness failed ({escape(failure.text)}); running it again on a "
            "fresh host (nothing done on the old one carries over; new login details follow)",
            highlight=False,
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

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.live.__exit__(kind, exc, trace)


def scenarios_table(scenarios: Sequence[Scenario], splits: Sequence[str] | None = None) -> Table:
    """The scenarios, a row each; ``splits``: generated worlds', shown in a column of their own."""
    table = Table(title="FixOS scenarios" if splits is None else "FixOS generated worlds")
    for col in ("id", "difficulty", *(["split"] if splits is not None else []), "faults", "title"):
        table.add_column(col)
    for i, s in enumerate(scenarios):
        extra = [splits[i]] if splits is not None else []
        table.add_row(s.id, s.difficulty, *extra, ", ".join(s.fault_types), escape(s.title))
    return table


def verdict_table(record: EpisodeRecord) -> Table:
    table = Table(title=f"{record.episode_id}: reward {record.reward}")
    for col in ("check", "scored", "passed", "failed in", "detail"):
        table.add_column(col)
    for c in record.verdict.checks if record.verdict else []:
        mark = "[green]yes[/]" if c.passed else "[red]no[/]"
        # which phase of the final verdict failed it (fixos.episodes.durability): as left, after the restarts
        failed_in = c.failed_in.replace("_", " ")
        table.add_row(escape(c.name), "yes" if c.scored else "gate", mark, failed_in, escape(c.detail))
    return table


def timings_line(record: EpisodeRecord) -> str:
    t = record.timings
    return (
        f"reset {t.reset:.2f}s (start -> confirmed broken) · {record.steps} step(s), "
        f"mean step latency {t.step_mean * 1000:.1f} ms · verify {t.verify:.3f}s"
    )


def _cell(stats: Stats) -> str:
    if stats.mean_reward is None:
        return "[yellow]invalid[/]" if stats.episodes else "-"
    said = "" if stats.mean_diagnosis is None else f" · diagnosis {stats.mean_diagnosis:.2f}"
    return f"{stats.mean_reward:.2f} · {stats.solved_pct:.0f}%{said}"


def _per_agent(
    title: str, column: str, agents: Sequence[str], rows: Mapping[str, Mapping[str, Stats]]
) -> Table:
    """One row a group (a difficulty, a fault family), one column an agent."""
    table = Table(title=title)
    table.add_column(column)
    for agent in agents:
        table.add_column(agent, justify="right")
    for name, per_agent in rows.items():
        table.add_row(name, *(_cell(per_agent[a]) for a in agents))
    return table


def summary_tables(summary: Summary) -> list[Table]:
    """Per scenario, per difficulty and per fault family, one column per agent: mean reward · solved %."""
    agents = summary.agents
    by_scenario = Table(title="FixOS results: mean reward · solved % (steps, wall s, time to repair s)")
    by_scenario.add_column("scenario")
    by_scenario.add_column("difficulty")
    for agent in agents:
        by_scenario.add_column(agent, justify="right")
    for sid, row in summary.scenarios.items():
        cells = []
        for agent in agents:
            st = row.agents[agent]
            extra = (
                ""
                if st.mean_steps is None or st.mean_wall_s is None
                else f" ({st.mean_steps:g}, {st.mean_wall_s:g}, {dash(st.mean_time_to_repair_s)})"
            )
            cells.append(_cell(st) + extra)
        by_scenario.add_row(sid, row.difficulty, *cells)
    by_difficulty = _per_agent("by difficulty", "difficulty", agents, summary.difficulties)
    by_difficulty.add_row("all", *(_cell(summary.overall[a]) for a in agents))
    title = "by fault family (an episode counts in each family of its faults)"
    by_family = _per_agent(title, "family", agents, summary.families)
    return [by_scenario, by_difficulty, by_family] if summary.families else [by_scenario, by_difficulty]


def validation_table(rows: Sequence[Validation]) -> Table:
    table = Table(
        title="fixos validate: oracle = 1.0, nop = 0.0, partial strictly between; "
        "a control (no fault): oracle and nop 1.0 (diagnosis 1.0 and 0.0), meddler 0.0"
    )
    for col in ("scenario", "seed", "oracle", "nop", "partial / meddler", "ok"):
        table.add_column(col)
    for row in rows:
        cells = []
        for agent in ("oracle", "nop", "partial" if "partial" in row.records else "meddler"):
            record = row.records.get(agent)
            if record is None:
                cells.append("-")
            elif not record.scored:
                cells.append(f"[yellow]{record.status}[/]")
            else:
                color = "green" if meets(agent, record) else "red"
                said = (
                    f" (diagnosis {record.diagnosis.score:.2f})"
                    if record.control and record.diagnosis
                    else ""
                )
                cells.append(f"[{color}]{record.reward:.2f}{said}[/]")
        table.add_row(row.scenario, str(row.seed), *cells, "[green]yes[/]" if row.ok else "[red]NO[/]")
    return table


def transcript_view(directory: Path) -> list[Any]:
    """The episode's steps and verdict, as rich renderables."""
    parts: list[Any] = []
    steps = read_transcript(directory)
    for step in steps:
        head = Text(f"[{step.index}] $ ", style="bold")
        head.append(step.command, style="bold cyan")
        head.append(f"   exit {step.exit_code} · {step.duration * 1000:.0f} ms", style="dim")
        parts.append(head)
        if step.output:
            parts.append(Text(step.output.rstrip("\n")))
    if not steps:
        parts.append(Text("(no commands recorded)", style="dim"))
    stopped = read_interrupted(directory)
    if stopped is not None and stopped.failure is not None:
        parts.append(Text(f"interrupted, not scored: {stopped.failure.detail}", style="bold yellow"))
    reward = read_reward(directory)
    if reward is not None:
        table = Table(title=f"reward {reward.reward}")
        for col in ("check", "scored", "passed", "detail"):
            table.add_column(col)
        for c in reward.checks:
            table.add_row(
                escape(c.name), "yes" if c.scored else "gate", "yes" if c.passed else "no", escape(c.detail)
            )
        parts.append(table)
    return parts


COMPARED_STYLE = {"better": "green", "worse": "red", "not scored": "yellow"}


def comparison_table(comparison: Comparison) -> Table:
    """``fixos compare A B``: per scenario the mean reward in each run, B's change highlighted."""
    table = Table(title=f"B ({comparison.b_id}) against A ({comparison.a_id}): mean reward per scenario")
    for col in ("scenario", "agent", "A", "B", "B - A", "B is"):
        table.add_column(col, justify="right" if col in ("A", "B", "B - A") else "left")
    for r in comparison.rows:
        style = COMPARED_STYLE.get(r.verdict, "")
        change = "-" if r.change is None else f"{r.change:+.2f}"
        a, b = ("-" if v is None else f"{v:.2f}" for v in (r.a, r.b))
        table.add_row(escape(r.scenario), escape(r.agent), a, b, change, Text(r.verdict, style=style))
    return table
