"""Helpers for tests against a real Docker engine."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import docker

from fixos.bench.local import Events
from fixos.stack.hosts import LABEL_OWNER, LABEL_RUN

T = TypeVar("T")


def shard(items: list[T], spec: str) -> list[T]:
    """``--shard K/N``: every N-th of ``items`` from the K-th (1-based), in order; ValueError
    on a spec that is not K/N with 1 <= K <= N."""
    k, n = (int(x) for x in spec.split("/"))
    if not 1 <= k <= n:
        raise ValueError(spec)
    return [item for i, item in enumerate(items) if i % n == k - 1]


def wait_for(condition: Callable[[], bool], *, timeout: float = 30.0, delay: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timeout: {condition}")
        time.sleep(delay)


def labelled(client: docker.DockerClient, run_id: str) -> list[str]:
    """Names of every container, network and volume that carries the run's label."""
    label = {"label": f"{LABEL_RUN}={run_id}"}
    found = [c.name for c in client.containers.list(all=True, filters=label, ignore_removed=True)]
    found += [n.name for n in client.networks.list(filters=label)]
    found += [v.name for v in client.volumes.list(filters=label)]
    return found


ROOT = Path(__file__).resolve().parent.parent


def start_fixos(*args: str, quiet: bool = False) -> subprocess.Popen:
    """`fixos ARGS` as a child process (its output piped as text unless ``quiet``)."""
    out = subprocess.DEVNULL if quiet else subprocess.PIPE
    return subprocess.Popen(
        [sys.executable, "-m", "fixos.cli", *args],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT if not quiet else subprocess.DEVNULL,
        text=True,
    )


def containers_owned_by(client: docker.DockerClient, pid: int, run_id: str | None = None) -> list:
    """Containers whose owner label names this process."""
    label = f"{LABEL_RUN}={run_id}" if run_id else LABEL_OWNER
    return [
        c
        for c in client.containers.list(all=True, filters={"label": label}, ignore_removed=True)
        if c.labels.get(LABEL_OWNER, "").split(":")[1:2] == [str(pid)]
    ]


class Watch(Events):
    """How many episodes ran at once, and every harness failure the bench retried."""

    def __init__(self) -> None:
        self.now = self.peak = 0
        self.retried: list[str] = []
        self.lock = threading.Lock()

    def started(self, job):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def finished(self, record, retried):
        with self.lock:
            self.now -= 1

    def retrying(self, job, failure):
        with self.lock:
            self.now -= 1
            self.retried.append(f"{job.episode_id}: {failure.text}")
