"""A bound on each host's writable filesystem, so that root inside cannot fill the machine's disk.

Two ways, chosen once per engine (``disk_mode``):

- ``quota``: the engine's storage driver bounds a container's writable layer
  (``--storage-opt size=``: overlay2 on xfs mounted with prjquota, btrfs, zfs).
  A write past the bound fails inside the host with ENOSPC.
- ``watch``: an engine without quota support (overlay2 on ext4, say). Each host
  gets RLIMIT_FSIZE at its bound (``host_ulimits``; root inside cannot raise a
  hard limit without CAP_SYS_RESOURCE, which hosts lack), so one big file fails
  inside the host with EFBIG; and a ``DiskWatch`` measures the writable layers
  and kills a host that passes its bound, many small files or
  ``fallocate --keep-size`` included. A killed host is the agent's doing
  (episodes/blame.py: a stopped container while the engine answers): its session
  ends and the verdict scores it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

import docker
from docker.errors import APIError, DockerException
from docker.types import Ulimit
from requests.exceptions import RequestException

log = logging.getLogger(__name__)

WATCH_PERIOD = 2.0
"""seconds between two measurements of a stack's writable layers (one engine call
for the whole stack; it walks each layer's changed files, see ``measure``)."""

_modes: dict[str, str] = {}
_modes_lock = threading.Lock()


def disk_mode(client: docker.DockerClient, image: str, labels: dict[str, str]) -> str:
    """``quota`` when the engine bounds a container's writable layer, else ``watch``.

    Asked of the engine once per process: overlay2 needs xfs (engine info); else
    create (never start) a container with ``--storage-opt size=``, which an
    engine without quota support refuses. The
    probe carries the stack's labels, so a sweep removes it if we die meanwhile.
    """
    key = client.api.base_url
    with _modes_lock:
        if key in _modes:
            return _modes[key]
        mode = "watch"
        info = client.info()
        backing = dict(info.get("DriverStatus") or []).get("Backing Filesystem", "")
        try:
            if info.get("Driver") == "overlay2" and backing != "xfs":
                # no probe (its refusal would be an error line in the engine's log)
                raise APIError(f"overlay2 on {backing or 'a filesystem'} other than xfs")
            probe = client.api.create_container(
                image,
                command=["true"],
                labels=labels,
                host_config=client.api.create_host_config(storage_opt={"size": "256M"}),
            )
            mode = "quota"
            with contextlib.suppress(DockerException):
                client.api.remove_container(probe["Id"], force=True)
        except APIError as exc:
            log.warning(
                "engine %s has no disk quotas (%s): hosts' disks are bounded by a file-size "
                "limit and a watcher that kills a host past its bound",
                key,
                exc.explanation or exc,
            )
        _modes[key] = mode
        return mode


def host_storage_opt(mode: str, disk_mb: int) -> dict[str, str] | None:
    return {"size": f"{disk_mb}M"} if mode == "quota" else None


def host_ulimits(mode: str, disk_mb: int) -> list[Ulimit] | None:
    """RLIMIT_FSIZE at the bound (in bytes; soft = hard so root cannot raise it)."""
    if mode == "quota":
        return None
    size = disk_mb * 1024 * 1024
    return [Ulimit(name="fsize", soft=size, hard=size)]


def measure(client: docker.DockerClient, container_ids: list[str]) -> dict[str, int]:
    """Bytes in each container's writable layer (the engine's SizeRw), in one call."""
    rows = client.api.containers(all=True, size=True, filters={"id": container_ids})
    return {row["Id"]: int(row.get("SizeRw") or 0) for row in rows}


class DiskWatch:
    """Kills any of a stack's containers whose writable layer passes its bound."""

    def __init__(
        self, client: docker.DockerClient, bounds: dict[str, int], *, period: float = WATCH_PERIOD
    ) -> None:
        self._client = client
        self._bounds = bounds  # container id -> bytes
        self._period = period
        self._stop = threading.Event()
        self.overruns: dict[str, int] = {}
        """container id -> bytes its layer held when it was killed."""
        self._thread = threading.Thread(target=self._run, name="fixos-disk-watch", daemon=True)

    def start(self) -> DiskWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self._period + 30)

    def check(self) -> None:
        """One measurement; kills what is over its bound."""
        watched = [c for c in self._bounds if c not in self.overruns]
        if not watched:
            return
        for container_id, used in measure(self._client, watched).items():
            if used > self._bounds[container_id]:
                self.overruns[container_id] = used
                log.warning(
                    "host %s wrote %d MB, past its %d MB disk: killed",
                    container_id[:12],
                    used >> 20,
                    self._bounds[container_id] >> 20,
                )
                with contextlib.suppress(DockerException):
                    self._client.api.kill(container_id)

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            with contextlib.suppress(DockerException, RequestException, OSError):
                self.check()


def bounds_of(containers: list[Any], disk_mb: list[int]) -> dict[str, int]:
    return {c.id: mb * 1024 * 1024 for c, mb in zip(containers, disk_mb, strict=True)}
