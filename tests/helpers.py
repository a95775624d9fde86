"""Helpers for tests against a real Docker engine."""

from __future__ import annotations

import time
from collections.abc import Callable

import docker

from fixos.stack import LABEL_RUN


def wait_for(condition: Callable[[], bool], *, timeout: float = 30.0, delay: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timeout: {condition}")
        time.sleep(delay)


def labelled(client: docker.DockerClient, run_id: str) -> list[str]:
    """Names of every container, network and volume that carries the run's label."""
    label = {"label": f"{LABEL_RUN}={run_id}"}
    found = [c.name for c in client.containers.list(all=True, filters=label)]
    found += [n.name for n in client.networks.list(filters=label)]
    found += [v.name for v in client.volumes.list(filters=label)]
    return found
