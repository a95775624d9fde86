"""``fixos validate``: prove scenarios sound (oracle 1.0, nop 0.0, partial in between)."""

from __future__ import annotations

import argparse
import threading
import time

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..bench.adversaries import outcome, validate_adversaries
from ..bench.local import Bench, Events, Job, Plan
from ..bench.validate import Validation, agents_for, meets, why
from ..episodes.episode import new_run_id
from ..records.failures import Failure
from ..records.models import EpisodeRecord
from ..records.rundir import RunDir
from ..scenarios.catalog import load_catalog, select
from ..stack.leftovers import remove_labelled
from ..views.terminal import validation_table
from .common import engines
from .episodes import ctrl_c_stops
from .view import finish_page, live_page


class RowPrinter(Events):
    """Says each scenario x seed's outcome as soon as its last agent's episode is in."""

    def __init__(self, console: Console, jobs: list[Job]) -> None:
        self._console = console
        self._lock = threading.Lock()
        self.rows: dict[tuple[str, int], Validation] = {}
        self._wanted: dict[tuple[str, int], int] = {}
        for job in jobs:
            key = (job.scenario, job.seed)
            self.rows.setdefault(key, Validation(job.scenario, job.seed))
            self._wanted[key] = self._wanted.get(key, 0) + 1

    def complete(self, row: Validation) -> bool:
        return len(row.records) == self._wanted[(row.scenario, row.seed)]

    def finished(self, record: EpisodeRecord, retried: bool) -> None:
        key = (record.scenario, record.seed)
        with self._lock:
            row = self.rows[key]
            row.records[record.agent] = record
            if not self.complete(row):
                return
            failed = [
                f"{a}: {r.reward if r.scored else r.error}" for a, r in row.records.items() if not meets(a, r)
            ]
            self._console.print(
                f"{row.scenario} seed {row.seed}: "
                + ("ok" if row.ok else "FAILED " + escape("; ".join(failed))),
                highlight=False,
            )
            for agent, record in row.records.items():  # why, as a scenario's author needs it
                for i, line in enumerate(why(agent, record)):
                    self._console.print(
                        ("    " if i == 0 else "      ") + line, markup=False, highlight=False
                    )

    def retrying(self, job: Job, failure: Failure) -> None:
        with self._lock:
            why = escape(failure.detail[:120])
            said = f"{job.episode_id}: the harness failed ({why}); once more on new hosts"
            self._console.print(said, highlight=False)


def cmd_validate(args: argparse.Namespace, console: Console) -> int:
    catalog = load_catalog(args.scenario_dir, only=args.scenarios)
    scenarios = select(catalog, args.scenarios)
    per_seed = sum(len(agents_for(s)) for s in scenarios)
    seeds = args.seeds.within(per_seed, args.max_episodes)
    ctrl_c_stops()
    found = engines(args.docker_host, scenarios, console)
    started = time.monotonic()
    # The episodes of a validation are a bench's: side by side on warm hosts, each made
    # durable in a run directory as it ends (its transcript shows why one failed), one
    # more run on new hosts when the harness failed it, and nothing left on Ctrl-C.
    jobs = [Job(s.id, seed, agent) for s in scenarios for seed in seeds for agent in agents_for(s)]
    plan = Plan(scenarios=[s.id for s in scenarios], seeds=seeds, agents=sorted({j.agent for j in jobs}))
    run = RunDir(args.results, new_run_id())
    printer = RowPrinter(console, jobs)
    events = live_page(printer, run, catalog, plan.scenarios)
    bench = Bench(plan, run, catalog, engines=found, parallel=args.jobs, events=events)
    console.print(
        f"validation {run.run_id}: {len(jobs)} episode(s), {args.jobs} at a time; results in {run.path}",
        highlight=False,
    )
    bench.execute(jobs)
    rows = list(printer.rows.values())
    adversaries: list[Table] = []
    held = True
    if args.adversaries:  # each strategy x scenario it applies to must score <= 0.2
        first = found[0]
        try:
            adversaries, held = validate_adversaries(
                scenarios,
                seeds,
                client=first.client,
                images=first.images,
                run_id=run.run_id,
                parallel=args.jobs,
                on_record=lambda case, r: console.print(f"{case.agent} on {case.scenario}: {outcome(r)}"),
            )
        finally:
            remove_labelled(first.client, run_id=run.run_id)
    console.print(validation_table(rows), *adversaries)
    console.print(f"{len(rows)} scenario x seed validations in {time.monotonic() - started:.1f}s")
    page = finish_page(events, console)
    if page is not None:
        console.print(f"run page: {page}", highlight=False)
    return 0 if all(printer.complete(r) and r.ok for r in rows) and held else 1
