"""Concurrent OpenEnv sessions (a benchmark, not a test): reset p50/p95 and steps/s with N
sessions at once against one FixOS server on 127.0.0.1, each session its own live host.

    .venv/bin/python scripts/perf_sessions.py --sessions 8,32,64   # make perf runs it too

Bounded: each session resets once and runs ``--steps`` commands; every client waits at most
``--timeout`` seconds per message; the server, its hosts and its warm pool are removed at the
end however it ends. Only loopback is used.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import uvicorn

from fixos.server import FixOSAction, FixOSEnv
from fixos.server.app import create_fixos_app
from fixos.server.context import ServerContext
from fixos.stack.hosts import remove_labelled

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


def measure_sessions(
    client, images, catalog, sessions: int, *, steps: int = 5, warm: int | None = None, timeout: float = 600
) -> dict[str, float]:
    """Reset p50/p95 and steps/s of ``sessions`` clients starting together; the warm pool keeps
    ``warm`` booted spares (default: one per session, so no reset waits for a boot it could skip)."""
    warm = sessions if warm is None else warm
    context = ServerContext(
        run_id=f"perf-sessions-{os.getpid()}-{sessions}",
        client=client,
        catalog={TASK: catalog[TASK]},  # one kind of host: the pool boots spares of that kind only
        images=images,
        warm=warm,
    )
    app = create_fixos_app(context, max_sessions=sessions, session_timeout=timeout)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port}"
        if warm:  # the pool starts on the first reset; wait until it holds its spares
            _session(url, 0, 0, timeout)
            pool = context._pool
            deadline = time.monotonic() + timeout
            while pool is not None and pool.ready_count(catalog[TASK].hosts) < warm:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)
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
    # steps/s: all sessions' steps over the time the step phases overlapped (wall minus the
    # slowest reset), the rate a trainer with this many rollouts in flight sees
    stepping = max(wall - max(resets), 1e-6)
    return {
        f"openenv {sessions} sessions: reset p50 s": statistics.median(resets),
        f"openenv {sessions} sessions: reset p95 s": pct(resets, 0.95),
        f"openenv {sessions} sessions: step p50 s": statistics.median(step_times) if step_times else 0.0,
        f"openenv {sessions} sessions: steps/s": len(step_times) / stepping,
    }


def main() -> int:
    from fixos.scenarios.catalog import load_catalog
    from fixos.stack.engine import connect
    from fixos.stack.images import ensure_image

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", default="8,32,64", help="session counts, comma-separated")
    parser.add_argument("--steps", type=int, default=5, help="steps per session")
    parser.add_argument("--warm", type=int, default=None, help="warm spares (default: one per session)")
    args = parser.parse_args()
    client = connect()
    images = {name: ensure_image(client, name, print) for name in ("server", "inspector")}
    catalog = load_catalog()
    print(f"load average before: {os.getloadavg()}")
    for n in (int(x) for x in args.sessions.split(",") if x):
        for name, value in measure_sessions(
            client, images, catalog, n, steps=args.steps, warm=args.warm
        ).items():
            print(f"{name}: {value:.2f}")
        print(f"load average after {n}: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
