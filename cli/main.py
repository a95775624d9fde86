"""fixos: the command line. Each command is a few calls into the phase modules."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import docker
from rich.console import Console
from rich.markup import escape

from fixos.agents import agent_class
from fixos.agents.external import VERIFY_REQUEST
from fixos.bench import Bench, Plan, bench_path, default_parallelism, parse_shard
from fixos.core.errors import FixOSError
from fixos.core.models import EpisodeRecord
from fixos.episodes import new_run_id
from fixos.records.report import compare, write_reports
from fixos.records.rundir import RunDir
from fixos.scenarios.catalog import load_catalog, select
from fixos.scenarios.schema import SCENARIO_DIR, Scenario
from fixos.stack.engine import Engine, connect
from fixos.stack.hosts import remove_labelled, sweep_dead_runs
from fixos.stack.images import ensure_image, replicate
from fixos.stack.pool import HostPool
from fixos.validate import Validation, agents_for, meets, validate
from fixos.view import (
    LiveView,
    PlainView,
    scenarios_table,
    summary_tables,
    timings_line,
    transcript_view,
    validation_table,
    verdict_table,
)

DEFAULT_RESULTS = Path("results")


def parse_seeds(text: str) -> list[int]:
    """``3``, ``1-5`` or ``1,4,9``."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            seeds += list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must look like 3, 1-5 or 1,4,9 (got {text!r})") from None
    return seeds


# -- formatting (returns renderables; printing happens in the commands) -------


# -- commands ----------------------------------------------------------------


def _engine(console: Console, url: str | None = None) -> docker.DockerClient:
    client = connect(url)
    swept = sweep_dead_runs(client)
    if swept:
        console.print(f"removed leftovers of dead run(s): {', '.join(swept)}")
    return client


def _engines(urls: Sequence[str] | None, scenarios: Sequence[Scenario], console: Console) -> list[Engine]:
    """Every engine asked for (the local one by default), each with the images present on it:
    built on the first, copied to the others."""
    engines: list[Engine] = []
    for url in urls or [None]:
        client = _engine(console, url)
        if not engines:
            images = _images(client, scenarios, console)
        else:
            first = engines[0]
            images = {
                name: replicate(first.client, client, tag, lambda line: _say(console, line), url or "")
                for name, tag in first.images.items()
            }
        engines.append(Engine(url or "local", client, images))
    return engines


def _say(console: Console, line: str) -> None:
    console.print(escape(f"[setup] {line.splitlines()[0][:100]}"), highlight=False, soft_wrap=True)


def _images(client: docker.DockerClient, scenarios: Sequence[Scenario], console: Console) -> dict[str, str]:
    names = sorted({h.image for s in scenarios for h in s.hosts})
    return {name: ensure_image(client, name, lambda line: _say(console, line)) for name in names}


def cmd_setup(args: argparse.Namespace, console: Console) -> int:
    catalog = load_catalog(args.scenario_dir)
    for engine in _engines(args.docker_host, list(catalog.values()), console):
        for name, tag in engine.images.items():
            console.print(escape(f"[setup] {engine.url}: image {name}: {tag} ready"), highlight=False)
    return 0


def cmd_list(args: argparse.Namespace, console: Console) -> int:
    console.print(scenarios_table(list(load_catalog(args.scenario_dir).values())))
    return 0


def _execute(
    bench_plan: Plan,
    run: RunDir,
    console: Console,
    parallel: int,
    scenarios: dict[str, Scenario],
    docker_hosts: Sequence[str] | None = None,
) -> list[EpisodeRecord]:
    """Run a plan's pending jobs with a live view; returns every record of the run."""
    for agent in bench_plan.agents:  # unknown names and missing settings fail before any container
        preflight = getattr(agent_class(agent), "preflight", None)
        if preflight is not None:
            preflight()
    engines = _engines(docker_hosts, [scenarios[s] for s in bench_plan.scenarios], console)
    bench = Bench(bench_plan, run, scenarios, engines=engines, parallel=parallel)
    pending = bench.pending()
    where = f" over {len(engines)} engines" if len(engines) > 1 else ""
    console.print(
        f"run {run.run_id}: {len(pending)} episode(s) to go, {parallel} at a time{where}; "
        f"results in {run.path}",
        highlight=False,
    )
    if console.is_terminal and not any(a in ("external", "human") for a in bench_plan.agents):
        with LiveView(console, len(pending)) as view:
            bench.events = view
            bench.execute(pending)
    else:
        bench.events = PlainView(console, len(pending))
        bench.execute(pending)
    return bench.records()


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    catalog = load_catalog(args.scenario_dir)
    scenario = select(catalog, [args.scenario])[0]
    bench_plan = Plan([scenario.id], [args.seed], [args.agent], args.transport)
    run = RunDir(args.results, new_run_id())
    bench_plan.save(run)
    records = _execute(bench_plan, run, console, 1, catalog)
    write_reports(run.path, run.run_id, records)
    if not records:
        raise FixOSError("the episode did not finish")
    record = records[0]
    if record.verdict is not None:
        console.print(verdict_table(record))
    console.print(timings_line(record), highlight=False)
    if record.status != "scored":
        console.print(f"[red]invalid episode[/]: {escape(record.error or '')}")
        return 1
    return 0


def cmd_bench(args: argparse.Namespace, console: Console) -> int:
    catalog = load_catalog(args.scenario_dir)
    started = time.monotonic()
    if args.resume:
        run = bench_path(args.results, args.resume)
        bench_plan = Plan.load(run)
    else:
        scenarios = select(catalog, args.scenarios)
        bench_plan = Plan(
            [s.id for s in scenarios], args.seeds, args.agent or ["baseline"], args.transport, args.shard
        )
        run = RunDir(args.results, new_run_id())
        bench_plan.save(run)
    records = _execute(bench_plan, run, console, args.jobs, catalog, args.docker_host)
    summary = write_reports(run.path, run.run_id, records)
    for table in summary_tables(summary):
        console.print(table)
    console.print(
        f"{len(records)} episode(s) in {time.monotonic() - started:.1f}s; "
        f"report: {run.path / 'report.md'}, junit: {run.path / 'junit.xml'}",
        highlight=False,
    )
    status = 1 if any(r.status != "scored" for r in records) else 0
    if args.compare:
        try:
            baseline = json.loads(args.compare.read_text())
        except (OSError, ValueError) as exc:
            raise FixOSError(f"--compare {args.compare}: cannot read a summary.json ({exc})") from None
        problems = compare(summary, baseline, args.tolerance)
        for problem in problems:
            console.print(f"[red]regression[/]: {escape(problem)}", highlight=False)
        if problems:
            return 2
        console.print(f"no regression against {args.compare} (tolerance {args.tolerance:g})", highlight=False)
    return status


def cmd_validate(args: argparse.Namespace, console: Console) -> int:
    scenarios = select(load_catalog(args.scenario_dir), args.scenarios)
    client = _engine(console)
    images = _images(client, scenarios, console)
    run_id = new_run_id()
    started = time.monotonic()
    rows: list[Validation] = []
    planned = [s.hosts for s in scenarios for _ in args.seeds for _ in agents_for(s)]
    # One warm spare: the next episode's host boots while this one runs.
    pool = HostPool(client, images, run_id=run_id, size=1, planned=planned)
    try:
        for scenario in scenarios:
            for seed in args.seeds:
                row = validate(scenario, seed, client=client, images=images, run_id=run_id, pool=pool)
                rows.append(row)
                failed = [f"{a}: {r.error or r.reward}" for a, r in row.records.items() if not meets(a, r)]
                console.print(
                    f"{scenario.id} seed {seed}: "
                    + ("ok" if row.ok else "FAILED " + escape("; ".join(failed))),
                    highlight=False,
                )
    finally:
        pool.close()
        remove_labelled(client, run_id=run_id)
    console.print(validation_table(rows))
    console.print(f"{len(rows)} scenario x seed validations in {time.monotonic() - started:.1f}s")
    return 0 if all(r.ok for r in rows) else 1


def cmd_play(args: argparse.Namespace, console: Console) -> int:
    args.agent = "human"
    return cmd_run(args, console)


def cmd_verify(args: argparse.Namespace, console: Console) -> int:
    run_dir = args.results / args.run
    if not run_dir.is_dir():
        raise FixOSError(f"no run {args.run!r} under {args.results}/")
    (run_dir / VERIFY_REQUEST).touch()
    console.print(f"asked run {args.run} to verify; its terminal shows the verdict", highlight=False)
    return 0


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    directory = args.results / args.episode
    if not directory.is_dir():
        raise FixOSError(f"no episode {args.episode!r} under {args.results}/ (give RUN_ID/EPISODE)")
    for part in transcript_view(directory):
        console.print(part)
    return 0


def cmd_export(args: argparse.Namespace, console: Console) -> int:
    from fixos.exporter import export_harbor

    scenarios = select(load_catalog(args.scenario_dir), args.scenarios)
    client = _engine(console)
    images = _images(client, scenarios, console)
    run_id = new_run_id()
    started = time.monotonic()
    try:
        tasks = export_harbor(
            scenarios,
            args.seeds,
            args.out,
            client=client,
            images=images,
            run_id=run_id,
            say=lambda line: console.print(escape(line), highlight=False),
        )
    finally:
        remove_labelled(client, run_id=run_id)
    console.print(
        f"wrote {len(tasks)} {args.format} task(s) under {args.out}/ in {time.monotonic() - started:.1f}s",
        highlight=False,
    )
    return 0


def cmd_clean(args: argparse.Namespace, console: Console) -> int:
    removed = sum(remove_labelled(connect(url), run_id=args.run) for url in args.docker_host or [None])
    console.print(f"removed {removed} container(s) and their networks", highlight=False)
    return 0


def cmd_serve(args: argparse.Namespace, console: Console) -> int:
    from fixos.server.app import serve  # imported here: OpenEnv is heavy, and only this command needs it
    from fixos.server.environment import ServerContext

    catalog = load_catalog(args.scenario_dir)
    client = _engine(console)
    images = _images(client, list(catalog.values()), console)
    context = ServerContext(client=client, catalog=catalog, images=images, warm=max(0, args.warm))
    console.print(
        f"serving FixOS over OpenEnv on http://127.0.0.1:{args.port} (run {context.run_id}, "
        f"at most {args.max_sessions} sessions, idle ones closed after {args.session_timeout:g}s); "
        "Ctrl-C stops it and removes every session's containers",
        highlight=False,
    )
    serve(
        port=args.port,
        max_sessions=args.max_sessions,
        session_timeout=args.session_timeout,
        context=context,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fixos", description="Benchmark agents that repair real broken servers."
    )
    parser.add_argument(
        "--scenario-dir",
        type=Path,
        default=SCENARIO_DIR,
        help="where the scenario YAML files are (default: the bundled scenarios/)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    setup = sub.add_parser("setup", help="make sure the engine answers and the host images are built")
    _docker_host_option(setup)
    sub.add_parser("list", help="list the scenarios")

    run = sub.add_parser("run", help="run one episode and show its verdict")
    run.add_argument("scenario")
    run.add_argument("--agent", default="oracle", help="agent name (default: oracle)")
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--transport", choices=["exec", "ssh"], default="exec", help="the agent's shell")
    run.add_argument("--results", type=Path, default=DEFAULT_RESULTS)

    play = sub.add_parser("play", help="a terminal on the broken host for you; scored when you exit")
    play.add_argument("scenario")
    play.add_argument("--seed", type=int, default=1)
    play.add_argument("--transport", choices=["exec", "ssh"], default="exec", help=argparse.SUPPRESS)
    play.add_argument("--results", type=Path, default=DEFAULT_RESULTS)

    verify = sub.add_parser("verify", help="tell a waiting `run --agent external` to score now")
    verify.add_argument("run", help="the run id it printed")
    verify.add_argument("--results", type=Path, default=DEFAULT_RESULTS)

    show = sub.add_parser("show", help="replay an episode's transcript and verdict")
    show.add_argument("episode", help="RUN_ID/EPISODE, e.g. 20261129-120000-ab12/easy_1-s1-oracle")
    show.add_argument("--results", type=Path, default=DEFAULT_RESULTS)

    bench = sub.add_parser("bench", help="run scenarios x seeds x agents and print a table")
    bench.add_argument("--scenarios", nargs="*", help="ids or difficulties (default: all)")
    bench.add_argument("--seeds", type=parse_seeds, default=[1], help="e.g. 1-3 (default: 1)")
    bench.add_argument("--agent", action="append", help="repeatable (default: baseline)")
    bench.add_argument(
        "-j",
        "--jobs",
        type=_positive,
        default=default_parallelism(),
        help=f"episodes at a time (default here: {default_parallelism()}, from cores and free memory)",
    )
    bench.add_argument("--transport", choices=["exec", "ssh"], default="exec", help="the agents' shell")
    bench.add_argument("--resume", metavar="RUN_ID", help="finish an interrupted run; its plan is kept")
    bench.add_argument("--shard", type=_shard, help="i/n: only this deterministic share of the jobs")
    bench.add_argument("--compare", type=Path, metavar="SUMMARY", help="exit 2 on a regression against it")
    bench.add_argument("--tolerance", type=float, default=0.05, help="allowed drop in mean reward")
    bench.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    _docker_host_option(bench)

    validate = sub.add_parser(
        "validate", help="prove scenarios sound: oracle 1.0, nop 0.0, partial in between"
    )
    validate.add_argument("scenarios", nargs="*", help="ids or difficulties (default: all)")
    validate.add_argument("--seeds", type=parse_seeds, default=[1, 2, 3], help="default: 1-3")

    export = sub.add_parser("export", help="write scenarios x seeds as task directories of another harness")
    export.add_argument("out", type=Path, help="output directory (one task directory per scenario x seed)")
    export.add_argument("--format", choices=["harbor"], default="harbor")
    export.add_argument("--scenarios", nargs="*", help="ids or difficulties (default: all)")
    export.add_argument("--seeds", type=parse_seeds, default=[1], help="e.g. 1-3 (default: 1)")

    clean = sub.add_parser("clean", help="remove every container and network FixOS left behind")
    clean.add_argument("--run", help="only this run id")
    _docker_host_option(clean)

    serve = sub.add_parser("serve", help="serve the scenarios over OpenEnv (HTTP + WebSocket) on 127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--max-sessions", type=_positive, default=8, help="sessions at a time (default: 8)")
    serve.add_argument(
        "--session-timeout",
        type=float,
        default=900.0,
        help="seconds without a request before a session and its containers are removed (default: 900)",
    )
    serve.add_argument(
        "--warm",
        type=int,
        default=1,
        help="booted hosts of each kind kept ready once the first session resets, so a reset does not wait "
        "for a boot (default: 1; 0 boots one per reset)",
    )
    return parser


def _docker_host_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--docker-host",
        action="append",
        metavar="URL",
        help="a Docker engine (unix://, tcp://, ssh://); repeat to spread over several "
        "(default: DOCKER_HOST or the local socket)",
    )


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1 (got {text!r})")
    return int(text)


def _shard(text: str) -> tuple[int, int]:
    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


COMMANDS = {
    "setup": cmd_setup,
    "list": cmd_list,
    "run": cmd_run,
    "bench": cmd_bench,
    "validate": cmd_validate,
    "play": cmd_play,
    "verify": cmd_verify,
    "show": cmd_show,
    "export": cmd_export,
    "clean": cmd_clean,
    "serve": cmd_serve,
}


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM unwinds like Ctrl-C, so every `finally` removes its containers.
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    console = console or Console()
    errors = Console(stderr=True, soft_wrap=True)
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return COMMANDS[args.command](args, console)
    except FixOSError as exc:
        errors.print(f"[red]{type(exc).__name__}[/red]: {escape(str(exc))}", highlight=False)
        return 1
    except KeyboardInterrupt:
        errors.print("interrupted; containers of this run removed")
        return 130


if __name__ == "__main__":
    sys.exit(main())
