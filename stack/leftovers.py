"""What runs leave behind: every object FixOS creates carries ``fixos.run`` (and
``fixos.owner``, the process that made it), so one run's leftovers, or those of runs
whose process died, are found and removed by label."""

from __future__ import annotations

import contextlib
import time

import docker
from docker.errors import APIError, NotFound

from ..core.errors import StackError
from .hosts import LABEL_OWNER, LABEL_RUN
from .names import owner_alive


def remove_labelled(client: docker.DockerClient, *, run_id: str | None = None) -> int:
    """Remove containers, networks and volumes of one run, or of every FixOS run."""
    label = f"{LABEL_RUN}={run_id}" if run_id else LABEL_RUN
    removed = 0
    for container in client.containers.list(all=True, filters={"label": label}, ignore_removed=True):
        try:
            container.remove(force=True, v=True)
            removed += 1
        except NotFound:
            pass
        except APIError as exc:
            # A pool or a prepared episode freed in the background is being removed right now
            # (the engine answers 409): wait for that removal, so "nothing left" holds on return.
            if exc.status_code != 409 or "in progress" not in str(exc):
                raise
            _wait_gone(client, container.id)
            removed += 1
    for network in client.networks.list(filters={"label": label}):
        # still in use by a container being created meanwhile: the next sweep gets it
        with contextlib.suppress(NotFound, APIError):
            network.remove()
    for volume in client.volumes.list(filters={"label": label}):
        with contextlib.suppress(NotFound):
            volume.remove(force=True)
    return removed


def _wait_gone(client: docker.DockerClient, container_id: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client.containers.get(container_id)
        except NotFound:
            return
        time.sleep(0.2)
    raise StackError(f"container {container_id[:12]} was still being removed after {timeout:g}s")


def sweep_dead_runs(client: docker.DockerClient) -> list[str]:
    """Remove what runs whose owning process died (SIGKILL, crash) left behind."""
    dead: set[str] = set()
    objects = client.containers.list(all=True, filters={"label": LABEL_RUN}, ignore_removed=True)
    objects += client.networks.list(filters={"label": LABEL_RUN})
    for obj in objects:
        labels = obj.attrs.get("Labels") or obj.attrs.get("Config", {}).get("Labels") or {}
        owner = labels.get(LABEL_OWNER)
        if owner and not owner_alive(owner):
            dead.add(labels[LABEL_RUN])
    for run_id in sorted(dead):
        remove_labelled(client, run_id=run_id)
    return sorted(dead)
