"""fixos: the command line. Each command is a few calls into the phase modules."""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import docker
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from agents import agent_class
from agents.external import VERIFY_REQUEST
from fixos.catalog import load_catalog, select
from fixos.engine import connect
from fixos.episodes import episode_id_for, new_run_id, run_episode
from fixos.errors import FixOSError
from fixos.images import ensure_image
from fixos.models import EpisodeRecord, to_json
from fixos.results import RunDir
from fixos.scenario import SCENARIO_DIR, Scenario
from fixos.stack import remove_labelled, sweep_dead_runs
from fixos.validate import Validation, meets, validate

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


def scenarios_table(scenarios: Sequence[Scenario]) -> Table:
    table = Table(title="FixOS scenarios")
    for col in ("id", "difficulty", "faults", "title"):
        table.add_column(col)
    for s in scenarios:
        table.add_row(s.id, s.difficulty, ", ".join(s.fault_types), escape(s.title))
    return table


def verdict_table(record: EpisodeRecord) -> Table:
    table = Table(title=f"{record.episode_id}: reward {record.reward}")
    for col in ("check", "scored", "passed", "detail"):
        table.add_column(col)
    for c in record.verdict.checks if record.verdict else []:
        mark = "[green]yes[/]" if c.passed else "[red]no[/]"
        table.add_row(escape(c.name), "yes" if c.scored else "gate", mark, escape(c.detail))
    return table


def timings_line(record: EpisodeRecord) -> str:
    t = record.timings
    return (
        f"reset {t.reset:.2f}s (start -> confirmed broken) · {record.steps} step(s), "
        f"mean step latency {t.step_mean * 1000:.1f} ms · verify {t.verify:.3f}s"
    )


def results_table(records: Sequence[EpisodeRecord], agents: Sequence[str]) -> Table:
    table = Table(title="FixOS results (mean reward over seeds; solved/valid)")
    table.add_column("scenario")
    table.add_column("difficulty")
    for agent in agents:
        table.add_column(agent, justify="right")
    scenarios = list(dict.fromkeys(r.scenario for r in records))
    for sid in scenarios:
        rows = [r for r in records if r.scenario == sid]
        cells = []
        for agent in agents:
            mine = [r for r in rows if r.agent == agent]
            valid = [r for r in mine if r.status == "scored"]
            if not valid:
                cells.append("[yellow]invalid[/]" if mine else "-")
                continue
            mean = statistics.fmean(r.reward or 0.0 for r in valid)
            solved = sum(r.solved for r in valid)
            cells.append(f"{mean:.2f} ({solved}/{len(valid)})")
        table.add_row(sid, rows[0].difficulty, *cells)
    return table


# -- commands ----------------------------------------------------------------


def _engine(console: Console) -> docker.DockerClient:
    client = connect()
    swept = sweep_dead_runs(client)
    if swept:
        console.print(f"removed leftovers of dead run(s): {', '.join(swept)}")
    return client


def _images(client: docker.DockerClient, scenarios: Sequence[Scenario], console: Console) -> dict[str, str]:
    names = sorted({h.image for s in scenarios for h in s.hosts})

    def say(line: str) -> None:
        console.print(escape(f"[setup] {line.splitlines()[0][:100]}"), highlight=False, soft_wrap=True)

    return {name: ensure_image(client, name, say) for name in names}


def cmd_setup(args: argparse.Namespace, console: Console) -> int:
    catalog = load_catalog(args.scenario_dir)
    client = _engine(console)
    images = _images(client, list(catalog.values()), console)
    for name, tag in images.items():
        console.print(escape(f"[setup] image {name}: {tag} ready"), highlight=False)
    return 0


def cmd_list(args: argparse.Namespace, console: Console) -> int:
    console.print(scenarios_table(list(load_catalog(args.scenario_dir).values())))
    return 0


def _run_all(
    scenarios: Sequence[Scenario],
    seeds: Sequence[int],
    agents: Sequence[str],
    results_root: Path,
    console: Console,
    transport: str = "exec",
) -> tuple[RunDir, list[EpisodeRecord]]:
    for agent in agents:  # unknown names and missing settings fail before any container starts
        preflight = getattr(agent_class(agent), "preflight", None)
        if preflight is not None:
            preflight()
    client = _engine(console)
    images = _images(client, scenarios, console)
    run = RunDir(results_root, new_run_id())
    console.print(f"run {run.run_id}: results in {run.path}", highlight=False)
    records: list[EpisodeRecord] = []
    try:
        for scenario in scenarios:
            for seed in seeds:
                for agent in agents:
                    workdir = run.episode_dir(episode_id_for(scenario.id, seed, agent))
                    record, steps = run_episode(
                        scenario,
                        seed,
                        agent,
                        client=client,
                        images=images,
                        run_id=run.run_id,
                        transport=transport,
                        workdir=workdir,
                    )
                    run.write_episode(record, steps)
                    records.append(record)
                    score = "invalid" if record.status != "scored" else f"{record.reward:.2f}"
                    console.print(
                        f"{record.episode_id}: {score} · {escape(timings_line(record))}"
                        + (f" · {escape(record.error)}" if record.error else ""),
                        highlight=False,
                    )
    finally:
        # Belt and braces: whatever an interrupted episode left, by label.
        remove_labelled(client, run_id=run.run_id)
    run.write_summary({"run_id": run.run_id, "episodes": [to_json(r) for r in records]})
    return run, records


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    scenario = select(load_catalog(args.scenario_dir), [args.scenario])[0]
    _, records = _run_all([scenario], [args.seed], [args.agent], args.results, console, args.transport)
    record = records[0]
    if record.verdict is not None:
        console.print(verdict_table(record))
    console.print(timings_line(record), highlight=False)
    if record.status != "scored":
        console.print(f"[red]invalid episode[/]: {escape(record.error or '')}")
        return 1
    return 0


def cmd_bench(args: argparse.Namespace, console: Console) -> int:
    scenarios = select(load_catalog(args.scenario_dir), args.scenarios)
    agents = args.agent or ["baseline"]
    started = time.monotonic()
    _, records = _run_all(scenarios, args.seeds, agents, args.results, console)
    console.print(results_table(records, agents))
    console.print(f"{len(records)} episode(s) in {time.monotonic() - started:.1f}s", highlight=False)
    return 1 if any(r.status != "scored" for r in records) else 0


def validation_table(rows: Sequence[Validation]) -> Table:
    table = Table(title="fixos validate: oracle = 1.0, nop = 0.0, partial strictly between")
    for col in ("scenario", "seed", "oracle", "nop", "partial", "ok"):
        table.add_column(col)
    for row in rows:
        cells = []
        for agent in ("oracle", "nop", "partial"):
            record = row.records.get(agent)
            if record is None:
                cells.append("-")
            elif record.status != "scored":
                cells.append("[yellow]invalid[/]")
            else:
                color = "green" if meets(agent, record) else "red"
                cells.append(f"[{color}]{record.reward:.2f}[/]")
        table.add_row(row.scenario, str(row.seed), *cells, "[green]yes[/]" if row.ok else "[red]NO[/]")
    return table


def cmd_validate(args: argparse.Namespace, console: Console) -> int:
    scenarios = select(load_catalog(args.scenario_dir), args.scenarios)
    client = _engine(console)
    images = _images(client, scenarios, console)
    run_id = new_run_id()
    started = time.monotonic()
    rows: list[Validation] = []
    try:
        for scenario in scenarios:
            for seed in args.seeds:
                row = validate(scenario, seed, client=client, images=images, run_id=run_id)
                rows.append(row)
                failed = [f"{a}: {r.error or r.reward}" for a, r in row.records.items() if not meets(a, r)]
                console.print(
                    f"{scenario.id} seed {seed}: "
                    + ("ok" if row.ok else "FAILED " + escape("; ".join(failed))),
                    highlight=False,
                )
    finally:
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


def transcript_view(directory: Path) -> list[Any]:
    """The episode's steps and verdict, as rich renderables."""
    parts: list[Any] = []
    transcript = directory / "transcript.jsonl"
    steps = [json.loads(x) for x in transcript.read_text().splitlines()] if transcript.exists() else []
    for step in steps:
        head = Text(f"[{step['index']}] $ ", style="bold")
        head.append(step["command"], style="bold cyan")
        head.append(f"   exit {step['exit_code']} · {step['duration'] * 1000:.0f} ms", style="dim")
        parts.append(head)
        if step["output"]:
            parts.append(Text(step["output"].rstrip("\n")))
    if not steps:
        parts.append(Text("(no commands recorded)", style="dim"))
    reward = directory / "reward.json"
    if reward.exists():
        data = json.loads(reward.read_text())
        table = Table(title=f"reward {data['reward']}")
        for col in ("check", "scored", "passed", "detail"):
            table.add_column(col)
        for c in data["checks"]:
            table.add_row(
                escape(c["name"]),
                "yes" if c["scored"] else "gate",
                "yes" if c["passed"] else "no",
                escape(c["detail"]),
            )
        parts.append(table)
    return parts


def cmd_show(args: argparse.Namespace, console: Console) -> int:
    directory = args.results / args.episode
    if not directory.is_dir():
        raise FixOSError(f"no episode {args.episode!r} under {args.results}/ (give RUN_ID/EPISODE)")
    for part in transcript_view(directory):
        console.print(part)
    return 0


def cmd_clean(args: argparse.Namespace, console: Console) -> int:
    client = connect()
    removed = remove_labelled(client, run_id=args.run)
    console.print(f"removed {removed} container(s) and their networks", highlight=False)
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

    sub.add_parser("setup", help="make sure the engine answers and the host images are built")
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
    bench.add_argument("--results", type=Path, default=DEFAULT_RESULTS)

    validate = sub.add_parser(
        "validate", help="prove scenarios sound: oracle 1.0, nop 0.0, partial in between"
    )
    validate.add_argument("scenarios", nargs="*", help="ids or difficulties (default: all)")
    validate.add_argument("--seeds", type=parse_seeds, default=[1, 2, 3], help="default: 1-3")

    clean = sub.add_parser("clean", help="remove every container and network FixOS left behind")
    clean.add_argument("--run", help="only this run id")
    return parser


COMMANDS = {
    "setup": cmd_setup,
    "list": cmd_list,
    "run": cmd_run,
    "bench": cmd_bench,
    "validate": cmd_validate,
    "play": cmd_play,
    "verify": cmd_verify,
    "show": cmd_show,
    "clean": cmd_clean,
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
