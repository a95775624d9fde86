"""Ray bench throughput on 1 node and on 2 nodes (a benchmark, not a test): the same oracle
episodes run with ``fixos bench --ray``'s RayBench over a local cluster (bench/ray_cluster.py):

1. the head alone (this machine's engine, 2 slots);
2. the head and a second node inside scripts/netns-engine's netns (its own engine, 2 slots);
3. the head alone with 4 slots (the slot count of 2 nodes, without the second node).

    make perf-ray                                     # or .venv/bin/python scripts/perf_ray.py
    .venv/bin/python scripts/perf_ray.py --episodes 8  # make perf runs it with 4

Both nodes share this machine's cores, so 2 nodes here measure what Ray and a second engine
cost, not what a second machine gains: read (2) against (3). Bounded: each run gets
``--timeout`` seconds (then its tasks are cancelled and swept); the cluster, the netns engine
and its data are removed however it ends. Needs root (netns) and fixos[ray]; only loopback
and the veth. Prints a table and writes results/perf-ray.json.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from perf_results import write_results

from fixos.bench.local import Plan
from fixos.bench.on_ray import RayBench
from fixos.bench.ray_cluster import QUIET, LocalCluster, free_port
from fixos.episodes.episode import new_run_id
from fixos.records.rundir import RunDir
from fixos.scenarios.catalog import load_catalog
from fixos.stack.engine import connect
from fixos.stack.images import ensure_base, ensure_image

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "netns-engine"
NAME, INDEX = "fxray", 201  # as tests/test_ray.py: never both at once
HEAD_IP = f"10.214.{INDEX}.1"
TASK = "easy_1"


class _Late(Exception):
    pass


def _late(signum, frame):
    raise _Late


def run_once(address: str, catalog, episodes: int, timeout: float) -> tuple[float, int]:
    """Oracle episodes per minute over the cluster, and how many were not scored 1.0."""
    plan = Plan(scenarios=[TASK], seeds=list(range(1, episodes + 1)), agents=["oracle"])
    run = RunDir(ROOT / "results" / "perf-runs", "perf-ray-" + new_run_id())
    bench = RayBench(plan, run, catalog, address=address)
    bench.connect()  # joining and preparing the nodes is not part of the rate
    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, _late)
    signal.alarm(int(timeout))
    try:
        bench.execute()
    except _Late:
        pass  # the rate counts the episodes that finished in time
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    records = run.records()
    rate = len(records) / ((time.monotonic() - started) / 60)
    return rate, sum(1 for r in records if r.reward != 1.0) + episodes - len(records)


def measure_ray(episodes: int = 4, timeout: float = 600.0, say=print) -> dict[str, float]:
    try:
        import ray  # noqa: F401
    except ImportError:
        say("ray perf skipped: no fixos[ray] in this environment")
        return {}
    if os.geteuid() != 0:
        say("ray perf skipped: the second node's netns engine needs root")
        return {}
    os.environ.update(QUIET)
    client = connect()
    catalog = load_catalog()
    tags = [ensure_base(client, say), *(ensure_image(client, n, say) for n in ("server", "inspector"))]
    figures: dict[str, float] = {}
    subprocess.run([SCRIPT, "down", NAME], check=True, capture_output=True)
    cluster = None
    try:
        out = subprocess.run([SCRIPT, "up", NAME, str(INDEX)], check=True, capture_output=True, text=True)
        where = dict(line.split("=", 1) for line in out.stdout.split())
        save = subprocess.Popen(["docker", "save", *tags], stdout=subprocess.PIPE)
        subprocess.run(["docker", "-H", where["socket"], "load", "-q"], stdin=save.stdout, check=True)
        save.wait()

        def measure(shape: str) -> None:
            rate, failed = run_once(cluster.address, catalog, episodes, timeout)
            figures[f"ray {shape}: oracle episodes/min ({episodes} x {TASK})"] = rate
            if failed:
                say(f"ray {shape}: {failed} oracle episode(s) not scored 1.0 or not finished")

        cluster = LocalCluster(HEAD_IP, free_port(HEAD_IP))
        cluster.start_head(slots=2)
        cluster.wait_for(1)
        measure("1 node, 2 slots")
        cluster.add_node(f"fixos-{NAME}", where["address"], where["socket"], slots=2)
        cluster.wait_for(2)
        measure("2 nodes, 2+2 slots")
        cluster.stop()
        cluster = LocalCluster(HEAD_IP, free_port(HEAD_IP))
        cluster.start_head(slots=4)
        cluster.wait_for(1)
        measure("1 node, 4 slots")
        figures["ray load average (1 min) at the end"] = os.getloadavg()[0]
    finally:
        if cluster is not None:
            cluster.stop()
        subprocess.run([SCRIPT, "down", NAME], check=True, capture_output=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=4, help="oracle episodes per run")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a run may take")
    args = parser.parse_args()
    figures = measure_ray(args.episodes, args.timeout)
    for name, value in figures.items():
        print(f"{name:60} {value:8.2f}")
    out = write_results("perf-ray", {"figures": figures})
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
