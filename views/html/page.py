"""What a run page and an episode page show, read from a run directory into typed models:
the journal's records, episodes a stop cut short, the ones running now (only a live run
knows them), the plan, and the plots; per episode its record, transcript and instruction.

Rendering is in ``run_table`` and ``episode``; this module only gathers."""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...bench.local import Plan
from ...core.errors import RecordError
from ...episodes.tasks import instruction_for
from ...records.models import EpisodeRecord, StepLine
from ...records.rundir import RunDir, read_interrupted, read_transcript
from ...records.saved import read_model

PAGE = "index.html"
"""the run's page at the top of its directory, and each episode's in the episode's directory."""
PLOT_TYPES = {".png": "image/png", ".svg": "image/svg+xml"}
FILES = ("report.md", "summary.json", "junit.xml", "episodes.jsonl")
"""the run's other files, linked from its page once they exist (the reports come at the end)."""
LARGEST_PLOT = 4 * 1024 * 1024
"""a plot bigger than this is linked, not embedded (a page of tens of MB opens slowly)."""


@dataclass(frozen=True)
class Running:
    """An episode started and not yet in the journal, as the live run knows it."""

    episode_id: str
    scenario: str
    seed: int
    agent: str
    started_at: float
    """Unix time it started."""
    steps: int = 0
    """commands it has run so far (as of the page's writing)."""


@dataclass(frozen=True)
class Plot:
    name: str
    uri: str
    """a data: URI of the image, or "" when too big to embed (then linked by name)."""


@dataclass
class RunPage:
    run_id: str
    records: list[EpisodeRecord]
    running: list[Running] = field(default_factory=list)
    interrupted: list[EpisodeRecord] = field(default_factory=list)
    """episodes a stop cut short: on disk, not in the journal (``--resume`` runs them again)."""
    plan: Plan | None = None
    plots: list[Plot] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    """which of ``FILES`` the run directory holds."""
    finished: bool = True
    """False while the run goes on: the page then says so and reloads itself."""
    written_at: float = field(default_factory=time.time)


@dataclass
class EpisodePage:
    record: EpisodeRecord
    steps: list[StepLine] = field(default_factory=list)
    instruction: str | None = None
    """what the agent was told (the scenario's words for the episode's task level); None when
    the scenario is no longer in the catalogue the page was written with."""
    unreadable: str | None = None
    """why the transcript could not be read, when it could not."""


def plots(directory: Path) -> list[Plot]:
    """The images at the top of a run directory (``scores.svg`` of the report, PNGs others put
    there), each as a data: URI so the page needs nothing beside it."""
    found = []
    for path in sorted(directory.iterdir()):
        kind = PLOT_TYPES.get(path.suffix.lower())
        if kind is None or not path.is_file():
            continue
        size = path.stat().st_size
        uri = ""
        if size <= LARGEST_PLOT:
            uri = f"data:{kind};base64," + base64.b64encode(path.read_bytes()).decode("ascii")
        found.append(Plot(path.name, uri))
    return found


def _plan(directory: Path) -> Plan | None:
    path = directory / "plan.json"
    try:
        return read_model(Plan, path) if path.exists() else None
    except RecordError:
        return None  # the page shows what it can; `--resume` is where a bad plan is reported


def load_run(
    directory: Path,
    *,
    running: Sequence[Running] = (),
    finished: bool = True,
    records: Sequence[EpisodeRecord] | None = None,
) -> tuple[RunPage, RunDir]:
    """The run's page from its directory; ``records``: its journal already read (a live
    page's ``Journal``), else it is read here."""
    run = RunDir(directory.parent, directory.name)
    records = run.records() if records is None else list(records)
    done = {r.episode_id for r in records} | {r.episode_id for r in running}
    interrupted = []
    for child in sorted(p for p in directory.iterdir() if p.is_dir() and p.name not in done):
        try:
            stopped = read_interrupted(child)
        except RecordError:
            continue
        if stopped is not None:
            interrupted.append(stopped)
    page = RunPage(
        run_id=run.run_id,
        records=records,
        running=list(running),
        interrupted=interrupted,
        plan=_plan(directory),
        plots=plots(directory),
        files=[name for name in FILES if (directory / name).is_file()],
        finished=finished,
    )
    return page, run


def load_episode(run: RunDir, record: EpisodeRecord, instructions: Mapping[str, str]) -> EpisodePage:
    """One journaled episode with its transcript, and its instruction from ``instructions``
    (scenario id -> the scenario's instruction) as its task level asked it."""
    words = instructions.get(record.scenario)
    directory = run.path / record.episode_id
    steps: list[StepLine] = []
    unreadable = None
    try:
        steps = read_transcript(directory) if directory.is_dir() else []
    except RecordError as exc:
        unreadable = str(exc)  # the verdict is still worth showing
    return EpisodePage(
        record=record,
        steps=steps,
        unreadable=unreadable,
        instruction=None if words is None else instruction_for(record.task, words),
    )
