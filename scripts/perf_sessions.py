"""Concurrent OpenEnv sessions (a benchmark, not a test): reset p50/p95 and steps/s with N
sessions at once against one FixOS server on 127.0.0.1, each session its own live host.

    make perf-sessions                                  # 8, 32 and 64 sessions
    make perf-sessions ARGS="--sessions 8 --steps 3"    # one size, fewer steps
    .venv/bin/python scripts/perf_sessions.py --sessions 8,32,64   # make perf runs it too

Per size: a server with a warm pool of one booted spare per session (``--warm``), waited for
until full, and its healthy baseline recorded by one warm-up reset (what any server has done
once its first session reset); then every client connects, resets at once, runs ``--steps``
commands and closes. Bounded: each client waits at most ``--timeout`` seconds per message;
the server, its hosts and its pool are removed at the end however it ends. Only loopback.
Prints a table and writes results/perf-sessions.json (the load average is part of every row:
on a shared machine the figures measure the machine as much as FixOS).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import uvicorn
from perf_results import write_results

from fixos.server import FixOSAction, FixOSEnv
from fixos.server.app import create_fixos_app
from fixos.server.context import ServerContext
from fixos.stack.leftovers import remove_labelled

TASK = "easy_1"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(q * (len(values) - 1)))]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _session(url: str, seed: int, steps: int, timeout: float) -> tuple[float, list[float]]:
    """One client: its reset time and each step's time."""
    with FixOSEnv(base_url=url, message_timeout_s=timeout).sync() as env:
        started = time.monotonic()
        env.reset(task_id=TASK, seed=seed)
        reset = time.monotonic() - started
        took = []
        for _ in range(steps):
            started = time.monotonic()
            env.step(FixOSAction(command="cat /proc/loadavg"))
            took.append(time.monotonic() - started)
        return reset, took


class _Recorded(ServerContext):
    """The server's context, keeping every episode it opens: where each reset's time went."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.opened = []

    def open_episode(self, *args, **kwargs):
        episode = super().open_episode(*args, **kwargs)
        self.opened.append(episode)
        return episode


def measure_sessions(
    client,
    images,
    catalog,
    sessions: int,
    *,
    steps: int = 5,
    warm: int | None = None,
    timeout: float = 300,
    prepared: bool = False,
) -> dict[str, float]:
    """Reset p50/p95 and steps/s of ``sessions`` clients starting together; the warm pool keeps
    ``warm`` booted spares (default: one per session, so no reset waits for a boot it could skip).
    ``prepared``: the sessions' rows are announced first and reset ahead of time (as a trainer
    that announces its next batch gets them), the pool filled again after, then measured."""
    warm = sessions if warm is None else warm
    context = _Recorded(
        run_id=f"perf-sessions-{os.getpid()}-{sessions}{'-prepared' if prepared else ''}",
        client=client,
        catalog={TASK: catalog[TASK]},  # one kind of host: the pool boots spares of that kind only
        images=images,
        warm=warm,
        prepare_ahead=sessions if prepared else 0,
    )
    app = create_fixos_app(context, max_sessions=sessions, session_timeout=timeout)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    load_before = 0.0
    try:
        while not server.started:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        ready = time.monotonic()
        _session(url, 0, 0, timeout)  # starts the pool and records the healthy baseline
        if prepared:
            context.announce([(TASK, seed) for seed in range(1, sessions + 1)])
            context.prepared.wait_ready(sessions, timeout)
        pool = context._pool
        deadline = time.monotonic() + timeout
        while pool is not None and pool.ready_count(catalog[TASK].hosts) < warm:
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
        ready = time.monotonic() - ready
        context.opened.clear()
        load_before = os.getloadavg()[0]
        started = time.monotonic()
        with ThreadPoolExecutor(sessions) as workers:
            results = list(
                workers.map(lambda seed: _session(url, seed, steps, timeout), range(1, sessions + 1))
            )
        wall = time.monotonic() - started
    finally:
        server.should_exit = True
        thread.join(60)
        context.close_all()
        remove_labelled(client, run_id=context.run_id)
    resets = [r for r, _ in results]
    step_times = [t for _, took in results for t in took]
    takes = [e.timings.boot for e in context.opened]  # waiting for a warm host (booted if none)
    # steps/s: all sessions' steps over the time the step phases overlapped (wall minus the
    # slowest reset), the rate a trainer with this many rollouts in flight sees
    stepping = max(wall - max(resets), 1e-6)
    return {
        "sessions": sessions,
        "prepared": int(prepared),
        "cold resets": len(context.opened),  # not prepared ahead: opened during the measurement
        "warm spares": warm,
        "reset p50 s": statistics.median(resets),
        "reset p95 s": pct(resets, 0.95),
        "reset max s": max(resets),
        "take p95 s": pct(takes, 0.95) if takes else 0.0,
        "step p50 s": statistics.median(step_times) if step_times else 0.0,
        "steps/s": len(step_times) / stepping,
        "wall s": wall,
        "ready in s": ready,
        "load 1 min before": load_before,
        "load 1 min after": os.getloadavg()[0],
    }


def as_figures(row: dict[str, float]) -> dict[str, float]:
    """One size's row as perf.py's flat figures ("openenv 8 sessions: reset p95 s": ...)."""
    n, how = int(row["sessions"]), " prepared" if row.get("prepared") else ""
    return {f"openenv {n} sessions{how}: {k}": v for k, v in row.items() if k not in ("sessions", "prepared")}


def print_table(rows: list[dict[str, float]], say=print) -> None:
    if not rows:
        return
    columns = list(rows[0])
    say(" | ".join(f"{c:>17}" for c in columns))
    for row in rows:
        say(" | ".join(f"{row[c]:>17.2f}" if isinstance(row[c], float) else f"{row[c]:>17}" for c in columns))


def main() -> int:
    from fixos.scenarios.catalog import load_catalog
    from fixos.stack.engine import connect
    from fixos.stack.images import ensure_image

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="8,32,64", help="session counts, comma-separated")
    parser.add_argument("--steps", type=int, default=5, help="steps per session (default 5)")
    parser.add_argument("--warm", type=int, default=None, help="warm spares (default: one per session)")
    parser.add_argument("--timeout", type=float, default=300, help="a client's wait per message, s")
    parser.add_argument(
        "--modes",
        default="warm,prepared",
        help="warm: resets take booted spares; prepared: rows announced, reset ahead (default: both)",
    )
    args = parser.parse_args()
    client = connect()
    images = {name: ensure_image(client, name, print) for name in ("server", "inspector")}
    catalog = load_catalog()
    print(f"{os.cpu_count()} CPUs, load average before: {os.getloadavg()}", flush=True)
    rows = []
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - {"warm", "prepared"}:
        parser.error(f"--modes: warm and/or prepared, not {args.modes!r}")
    for n in (int(x) for x in args.sessions.split(",") if x):
        for mode in modes:
            row = measure_sessions(
                client, images, catalog, n, steps=args.steps, warm=args.warm, prepared=mode == "prepared"
            )
            rows.append(row)
            print(f"{n} sessions ({mode}) done: {row}", flush=True)
    print_table(rows)
    out = write_results(
        "perf-sessions", {"task": TASK, "steps": args.steps, "cpus": os.cpu_count(), "rows": rows}
    )
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
