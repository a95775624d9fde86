"""``fixos calibrate``: agents that try, over generated worlds, level by level: solve rates
with 95 % Wilson intervals (``calibration.json`` and ``calibration.svg`` in the run directory;
``--markdown FILE``, ``--plot FILE``)."""

from __future__ import annotations

import argparse
import json
import threading
import time

from rich.console import Console

from ..bench.calibration import as_json, cells, markdown, plot
from ..bench.local import Bench, Events, Job, Plan
from ..core.errors import FixOSError
from ..episodes.episode import new_run_id
from ..records.models import EpisodeRecord
from ..records.rundir import RunDir
from ..scenarios.catalog import load_catalog
from ..scenarios.generator import LEVELS, VERSION, ids
from ..scenarios.worlds import held_out
from .common import engines
from .episodes import ctrl_c_stops

DEFAULT_AGENTS = ["baseline", "first-fixes:1"]


class Collector(Events):
    def __init__(self, console: Console) -> None:
        self.records: list[EpisodeRecord] = []
        self._console = console
        self._lock = threading.Lock()

    def finished(self, record: EpisodeRecord, retried: bool) -> None:
        with self._lock:
            self.records.append(record)
            said = f"{record.reward:.2f}" if record.scored and record.reward is not None else record.status
            self._console.print(f"{record.scenario} {record.agent}: {said}", highlight=False)


def parse_levels(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    try:
        levels = list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"levels look like 3 or 1-5 (got {text!r})") from None
    if not levels or not set(levels) <= set(LEVELS):
        raise argparse.ArgumentTypeError(f"levels are {min(LEVELS)}-{max(LEVELS)} (got {text!r})")
    return levels


def cmd_calibrate(args: argparse.Namespace, console: Console) -> int:
    if args.count < 1:
        raise FixOSError("--count must be at least 1")
    catalog = load_catalog(args.scenario_dir)
    worlds = [catalog[i] for level in args.levels for i in ids(level, args.count, args.split, held_out())]
    agents = args.agent or DEFAULT_AGENTS
    jobs = [Job(w.id, seed, agent) for w in worlds for seed in args.seeds for agent in agents]
    if len(jobs) > args.max_episodes:
        raise FixOSError(f"{len(jobs)} episodes > --max-episodes {args.max_episodes}")
    ctrl_c_stops()
    found = engines(args.docker_host, worlds, console)
    started = time.monotonic()
    plan = Plan(scenarios=[w.id for w in worlds], seeds=list(args.seeds), agents=agents)
    run = RunDir(args.results, new_run_id())
    collector = Collector(console)
    console.print(f"calibration {run.run_id}: {len(jobs)} episode(s), {args.jobs} at a time", highlight=False)
    Bench(plan, run, catalog, engines=found, parallel=args.jobs, events=collector).execute(jobs)
    table = cells(collector.records)
    (run.path / "calibration.json").write_text(json.dumps(as_json(table), indent=2) + "\n")
    drawn = plot(table, f"FixOS calibration: generated worlds, generator v{VERSION}")
    (run.path / "calibration.svg").write_text(drawn)
    if args.plot is not None:
        args.plot.write_text(drawn)
    text = markdown(table)
    if args.markdown is not None:
        args.markdown.write_text(text)
    console.print(text, markup=False, highlight=False)
    console.print(
        f"{len(jobs)} episodes in {time.monotonic() - started:.1f}s; {run.path / 'calibration.json'}"
    )
    return 0
