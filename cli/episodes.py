"""``fixos run``, ``play``, ``bench``, ``verify`` and ``show``: episodes with a live view, and records."""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from ..agents import agent_class
from ..agents.external import VERIFY_REQUEST
from ..bench.local import Bench, Events, Plan, bench_path
from ..bench.on_ray import RayBench, require_ray
from ..core.errors import FixOSError
from ..diagnosis import parse_report, report_schema
from ..episodes.diagnosed import REPORT_FILE
from ..episodes.episode import new_run_id
from ..records.models import EpisodeRecord
from ..records.report import write_reports
from ..records.rundir import RunDir
from ..records.summary import compare, read_summary
from ..scenarios.catalog import load_catalog, select
from ..scenarios.schema import Scenario
from ..views.terminal import LiveView, PlainView, summary_tables, timings_line, transcript_view, verdict_table
from .common import engines, sweep_if_engine
from .view import finish_page, live_page


def execute(
    bench_plan: Plan,
    run: RunDir,
    console: Console,
    parallel: int,
    scenarios: dict[str, Scenario],
    docker_hosts: Sequence[str] | None = None,
    ray: str | None = None,
) -> tuple[list[EpisodeRecord], Events]:
    """Run a plan's pending jobs with a live view and the run's page kept current; returns
    every record of the run, and the events it heard (``finish_page`` takes them)."""
    ctrl_c_stops()
    for agent in bench_plan.agents:  # unknown names and missing settings fail before any container
        preflight = getattr(agent_class(agent), "preflight", None)
        if preflight is not None:
            preflight()
    bench: Bench | RayBench
    if ray is not None:  # the cluster's nodes bring their own engines; its slots set the pace
        bench = RayBench(bench_plan, run, scenarios, address=ray)
        parallel = bench.connect()
        where = f" as Ray tasks over {len(bench.nodes)} node(s)"
    else:
        found = engines(docker_hosts, [scenarios[s] for s in bench_plan.scenarios], console)
        bench = Bench(bench_plan, run, scenarios, engines=found, parallel=parallel)
        where = f" over {len(found)} engines" if len(found) > 1 else ""
    pending = bench.pending()
    console.print(
        f"run {run.run_id}: {len(pending)} episode(s) to go, {parallel} at a time{where}; "
        f"results in {run.path}",
        highlight=False,
    )
    if console.is_terminal and not any(a in ("external", "human") for a in bench_plan.agents):
        with LiveView(console, len(pending)) as view:
            bench.events = live_page(view, run, scenarios, bench_plan.scenarios)
            bench.execute(pending)
    else:
        bench.events = live_page(PlainView(console, len(pending)), run, scenarios, bench_plan.scenarios)
        bench.execute(pending)
    return bench.records(), bench.events


def ctrl_c_stops() -> None:
    """Ctrl-C raises KeyboardInterrupt even in a process started with SIGINT ignored (a
    script's background job): Python would keep it ignored and the run could not be stopped."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    catalog = load_catalog(args.scenario_dir, only=[args.scenario])
    scenario = select(catalog, [args.scenario])[0]
    bench_plan = Plan(
        scenarios=[scenario.id],
        seeds=[args.seed],
        agents=[args.agent],
        transport=args.transport,
        task=getattr(args, "task", "repair"),
    )
    run = RunDir(args.results, new_run_id())
    bench_plan.save(run)
    records, events = execute(bench_plan, run, console, 1, catalog)
    write_reports(run.path, run.run_id, records)
    page = finish_page(events, console)
    if not records:
        raise FixOSError("the episode did not finish")
    record = records[0]
    if record.verdict is not None:
        console.print(verdict_table(record))
    console.print(timings_line(record), highlight=False)
    if page is not None:
        console.print(f"run page: {page}", highlight=False)
    if record.status != "scored":
        console.print(f"[red]invalid episode[/]: {escape(record.error or '')}")
        return 1
    return 0


def cmd_play(args: argparse.Namespace, console: Console) -> int:
    args.agent = "human"
    return cmd_run(args, console)


def cmd_bench(args: argparse.Namespace, console: Console) -> int:
    catalog = load_catalog(args.scenario_dir, only=None if args.resume else args.scenarios)
    started = time.monotonic()
    if args.ray is not None:  # before a run directory is made for nothing
        if args.docker_host:
            raise FixOSError("--ray and --docker-host do not go together: a Ray node brings its own engine")
        require_ray()
    if args.resume:
        run = bench_path(args.results, args.resume)
        bench_plan = Plan.load(run)
    else:
        scenarios = select(catalog, args.scenarios)
        agents = args.agent or ["baseline"]
        shards = args.shard[1] if args.shard else 1
        per_seed = -(-len(scenarios) * len(agents) // shards)  # this shard's share, rounded up
        bench_plan = Plan(
            scenarios=[s.id for s in scenarios],
            seeds=args.seeds.within(per_seed, args.max_episodes),
            agents=agents,
            transport=args.transport,
            task=args.task,
            shard=args.shard,
        )
        run = RunDir(args.results, new_run_id())
        bench_plan.save(run)
    baseline = read_summary(args.compare) if args.compare else None  # a bad file fails before the run
    records, events = execute(bench_plan, run, console, args.jobs, catalog, args.docker_host, args.ray)
    summary = write_reports(run.path, run.run_id, records)
    page = finish_page(events, console)
    for table in summary_tables(summary):
        console.print(table)
    console.print(
        f"{len(records)} episode(s) in {time.monotonic() - started:.1f}s; "
        f"report: {run.path / 'report.md'}, junit: {run.path / 'junit.xml'}",
        highlight=False,
    )
    if page is not None:  # the last line: the one to open
        console.print(f"run page: {page}", highlight=False)
    status = 1 if any(r.status != "scored" for r in records) else 0
    if baseline is not None:
        problems = compare(summary, baseline, args.tolerance)
        for problem in problems:
            console.print(f"[red]regression[/]: {escape(problem)}", highlight=False)
        if problems:
            return 2
        console.print(f"no regression against {args.compare} (tolerance {args.tolerance:g})", highlight=False)
    return status


def cmd_verify(args: argparse.Namespace, console: Console) -> int:
    sweep_if_engine(console)
    run_dir = args.results / args.run
    if not run_dir.is_dir():
        raise FixOSError(f"no run {args.run!r} under {args.results}/")
    if args.report is not None:  # refused here, naming the field, before the episode ends
        try:
            text = args.report.read_text(encoding="utf-8")
        except OSError as exc:
            raise FixOSError(f"{args.report}: cannot read: {exc.strerror or exc}") from None
        parse_report(text, where=str(args.report))
        (run_dir / REPORT_FILE).write_text(text, encoding="utf-8")
    (run_dir / VERIFY_REQUEST).touch()
    console.print(f"asked run {args.run} to verify; its terminal shows the verdict", highlight=False)
    return 0


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    sweep_if_engine(console)
    directory = args.results / args.episode
    if not directory.is_dir():
        raise FixOSError(f"no episode {args.episode!r} under {args.results}/ (give RUN_ID/EPISODE)")
    for part in transcript_view(directory):
        console.print(part)
    return 0


def cmd_schema(args: argparse.Namespace, console: Console) -> int:
    """The JSON schema of a report (the only ``what`` so far), on stdout as it is."""
    print(json.dumps(report_schema(), indent=2))
    return 0
