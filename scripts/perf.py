"""FixOS performance benchmark (a script, not a test): prints a table and writes
results/perf.json. Machines are noisy: read medians and ratios, not single runs.

    make perf            # or: .venv/bin/python scripts/perf.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from perf_results import write_results
from rich.table import Table

from fixos.bench.local import Bench, Plan
from fixos.episodes.episode import Episode, new_run_id
from fixos.records.rundir import RunDir
from fixos.scenarios.catalog import load_catalog
from fixos.stack.engine import Engine, connect
from fixos.stack.images import ensure_image
from fixos.stack.leftovers import remove_labelled
from fixos.stack.pool import HostPool
from fixos.views.console import make_console

ROOT = Path(__file__).resolve().parent.parent

TARGETS = {
    "reset_median_s": 0.5,
    "step_median_ms": 2.0,
    "verify_median_s": 0.15,
    "oracle_episodes_per_min": 150,
    "memory_per_episode_mb": 150,
}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def resident_mb(client, container_id: str) -> float:
    stats = client.containers.get(container_id).stats(stream=False)["memory_stats"]
    detail = stats.get("stats", {})
    cache = detail.get("cache", 0) or detail.get("inactive_file", 0)
    return (stats.get("usage", 0) - cache) / 2**20


def measure_resets(client, images, scenario, n: int, run_id: str, warm: bool) -> dict[str, list[float]]:
    """Reset and verify times, and memory of the host once repaired (all services up).

    Warm: each reset takes a host the pool booted beforehand (waited for, so the
    figure is the reset an episode sees when the pool keeps up)."""
    out: dict[str, list[float]] = {"reset": [], "verify": [], "memory": []}
    pool = None
    if warm:
        pool = HostPool(client, images, run_id=run_id, size=1, planned=[scenario.hosts] * n)
    try:
        for seed in range(1, n + 1):
            while pool is not None and pool.ready_count() < 1:
                time.sleep(0.05)
            episode_id = f"{scenario.id}-s{seed}-{'warm' if warm else 'cold'}"
            with Episode(
                scenario, seed, client=client, images=images, run_id=run_id, episode_id=episode_id, pool=pool
            ) as ep:
                out["reset"].append(ep.timings.reset)
                ep.shell.run(scenario.solution, timeout=120)
                ep.shell.run("curl -s -o /dev/null http://127.0.0.1/status")
                out["memory"].append(resident_mb(client, ep.host.handle.container_id))
                ep.verify()
                out["verify"].append(ep.timings.verify)
    finally:
        if pool is not None:
            pool.close()
    return out


def measure_steps(client, images, scenario, n: int, run_id: str) -> dict[str, list[float]]:
    out = {}
    with Episode(scenario, 1, client=client, images=images, run_id=run_id) as ep:
        for transport in ("exec", "ssh"):
            shell = ep.host.shell() if transport == "exec" else ep.host.ssh_shell()
            with shell:
                shell.run("true")
                out[transport] = [shell.run("echo ok").duration * 1000 for _ in range(n)]
    return out


def measure_throughput(client, images, catalog, parallel: int, seeds: int) -> tuple[float, float, int]:
    """Oracle episodes per minute over the easy scenarios, machine-wide CPU-seconds per
    episode (/proc/stat: FixOS, the engine, the hosts, and whatever else ran), and how
    many were not scored 1.0."""
    from perf_harbor import machine_cpu_seconds

    easy = [s.id for s in catalog.values() if s.difficulty == "easy"]
    run = RunDir(ROOT / "results" / "perf-runs", "perf-" + new_run_id())
    plan = Plan(scenarios=easy, seeds=list(range(1, seeds + 1)), agents=["oracle"])
    started, cpu = time.monotonic(), machine_cpu_seconds()
    Bench(plan, run, catalog, engines=[Engine("local", client, images)], parallel=parallel).execute()
    rate = len(plan.jobs()) / ((time.monotonic() - started) / 60)
    per_episode = (machine_cpu_seconds() - cpu) / len(plan.jobs())
    return rate, per_episode, sum(1 for r in run.records() if r.reward != 1.0)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument(
        "--sessions", default=None, help="concurrent OpenEnv sessions to measure (default 8,32,64; quick: 8)"
    )
    args = parser.parse_args()
    n = 3 if args.quick else 8
    console = make_console()
    client = connect()
    catalog = load_catalog()
    images = {
        name: ensure_image(client, name, lambda line: console.print(line)) for name in ("server", "inspector")
    }
    figures: dict[str, float] = {}
    run_id = "perf-" + new_run_id()
    try:
        for label, sid in (("nginx only (easy_1)", "easy_1"), ("nginx+mariadb (easy_2)", "easy_2")):
            for warm in (False, True):
                got = measure_resets(client, images, catalog[sid], n, run_id, warm)
                kind = "warm pool" if warm else "cold boot"
                figures[f"reset {label}, {kind}: median s"] = statistics.median(got["reset"])
                figures[f"reset {label}, {kind}: p95 s"] = pct(got["reset"], 0.95)
                if warm:
                    figures[f"verify {label}: median s"] = statistics.median(got["verify"])
                    figures[f"memory per live episode {label}: MB"] = max(got["memory"])
        steps = measure_steps(client, images, catalog["easy_1"], 200, run_id)
        for transport, values in steps.items():
            figures[f"step latency {transport}: median ms"] = statistics.median(values)
            figures[f"step latency {transport}: p95 ms"] = pct(values, 0.95)
        for parallel in (1, 2, 4, 8):
            rate, cpu, failed = measure_throughput(client, images, catalog, parallel, 2 if args.quick else 4)
            figures[f"oracle episodes/min easy -j {parallel}"] = rate
            figures[f"machine CPU-s per oracle episode easy -j {parallel}"] = cpu
            if failed:
                console.print(f"[red]-j {parallel}: {failed} oracle episode(s) not scored 1.0[/]")
        from perf_sessions import as_figures, measure_sessions  # scripts/ beside this file

        for sessions in (args.sessions or ("8" if args.quick else "8,32,64")).split(","):
            for prepared in (False, True):
                row = measure_sessions(client, images, catalog, int(sessions), prepared=prepared)
                figures.update(as_figures(row))
        from perf_ray import measure_ray  # 1 node vs 2 nodes, the second in a netns engine

        figures.update(measure_ray(4, say=console.print))
        from perf_price import measure_price  # each phase of a valid episode, wall and CPU

        figures.update(measure_price(3 if args.quick else 5, 12, say=console.print))
        from perf_failing import measure_failing  # a failing episode's verify against a passing one's

        figures.update(measure_failing(1 if args.quick else 3, ["net_5", "net_hard_3", "net_3", "tls_3"]))
        from perf_harbor import measure_side_by_side  # Harbor's own runner on the exported task

        # and once more without the hold window (no valid score): what the hold costs such a run
        rounds = 2 if args.quick else 4
        figures.update(measure_side_by_side(8, 4, rounds, say=console.print, without_hold=True))
        figures["load average (1 min) at the end"] = os.getloadavg()[0]
    finally:
        remove_labelled(client, run_id=run_id)
    table = Table(
        title="FixOS perf (targets on a 2-core machine in the issue: reset <= 0.5 s, "
        "step <= 2 ms, verify <= 0.15 s, >= 150 episodes/min, <= 150 MB)"
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in figures.items():
        table.add_row(name, f"{value:.3f}")
    console.print(table)
    out = write_results("perf", {"figures": figures, "targets": TARGETS})
    console.print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
