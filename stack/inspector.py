"""A vantage point on one host that the agent (root inside it) cannot alter.

An inspector is a short-lived container started at verify time from
``images/inspector``. It joins the host's PID and network namespaces, so its
``ps``, ``/proc`` and ``ss`` see the host's processes and sockets, but it runs
its *own* programs, libraries and shell from its own read-only filesystem, in
its own cgroup (PIDs, memory, CPU). So a replaced ``ps``, a missing bash, an
``/etc/ld.so.preload``, a fork bomb filling the host's PID limit or a full
``/var/log`` change what the inspector sees, never the tools it sees it with.

The host's filesystem, as the host's init sees it (its tmpfs ``/var/log``
included), is under ``/proc/1/root`` in the inspector: ``host_path("/etc/x")``.
Its MariaDB answers on the host's own socket there (``mariadb_command``);
root's ``unix_socket`` login works because the inspector's uid 0 is the host's.

Capabilities, measured (``tests/test_inspector.py``): ``SYS_PTRACE`` to open
``/proc/<pid>/root``, ``exe``, ``cwd`` and ``fd`` of the host's processes,
``DAC_READ_SEARCH`` to list the ``fd`` of those that are not root's (nginx's
workers, so ``ss -p`` names every holder of a port) and to read files only
their owner may read. Nothing else: no ``DAC_OVERRIDE``, no ``KILL``.

What the agent can still do to an inspector is in README.md ("Threat model").
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import docker
from docker.errors import APIError, DockerException, NotFound

from ..core.errors import StackError
from ..shells.exec import ExecShell
from ..verifier import vantage
from .hosts import LABEL_EPISODE, LABEL_OWNER, LABEL_RUN, LiveHost
from .images import Say, ensure_image
from .names import owner_label

IMAGE_NAME = "inspector"
LABEL_ROLE = "fixos.role"
ROLE = "inspector"
HOST_ROOT = vantage.INSPECTOR_ROOT
"""where the host's filesystem is, seen from the inspector: its PID 1 (init) is the host's
init, which the agent can neither kill nor move to another root (no CAP_SYS_ADMIN, no chroot
of a running process)."""
CAPABILITIES = ("SYS_PTRACE", "DAC_READ_SEARCH")
MARIADB_SOCKET = vantage.MARIADB_SOCKET


def host_path(path: str) -> str:
    """``path`` on the host, as the inspector reaches it (``/etc/x`` -> ``/proc/1/root/etc/x``)."""
    return vantage.under(HOST_ROOT, path)


def mariadb_command(query: str) -> str:
    """A command running ``query`` as root on the host's MariaDB, with the inspector's own
    client and no option file (``--no-defaults``: nothing the host holds is read)."""
    return vantage.mariadb_command(query, HOST_ROOT)


SERVICE_DAEMONS = vantage.SERVICE_DAEMONS


def service_running_command(service: str) -> str:
    """A command that exits 0 when the host's ``service`` runs: its pid file (read as root,
    whatever its mode: DAC_READ_SEARCH) names a process of this PID namespace whose program
    is the service's daemon (``fixos.verifier.vantage``)."""
    return vantage.service_running_command(service, HOST_ROOT)


def filesystem_use_command(path: str, metric: str = "space") -> str:
    """A command printing how full the host's filesystem holding ``path`` is, as the host's
    ``df`` would print it (``statfs``: ``df`` here would measure the inspector's own disk)."""
    return vantage.filesystem_use_command(path, metric, HOST_ROOT)


def inspector_image(client: docker.DockerClient, say: Say) -> str:
    """The inspector image's tag on this engine, built once from images/inspector."""
    return ensure_image(client, IMAGE_NAME, say)


@dataclass(frozen=True)
class InspectorLimits:
    """The inspector's own cgroup: the host's limits (PIDs, memory) never apply to it."""

    pids: int = 64
    memory_mb: int = 256
    cpus: float = 1.0
    tmp_mb: int = 16
    """its /tmp; /run (the session's state files) gets 4 MiB."""


class Inspector:
    """One inspector for one live host; a context manager that always removes it.

    >>> with Inspector(client, host, image) as inspector:
    ...     inspector.shell.run(f"cat {host_path('/etc/hostname')}")
    """

    def __init__(
        self,
        client: docker.DockerClient,
        host: LiveHost,
        image: str,
        *,
        limits: InspectorLimits | None = None,
        default_timeout: float = 20.0,
    ) -> None:
        self._client = client
        self.host = host
        self.image = image
        self.limits = limits or InspectorLimits()
        self._default_timeout = default_timeout
        self._container: Any = None
        self._shell: ExecShell | None = None

    @property
    def shell(self) -> ExecShell:
        """The inspector's own bash session (clean environment, its own tools)."""
        if self._shell is None:
            raise StackError(f"the inspector of host {self.host.name} is not started (use it as `with`)")
        return self._shell

    @property
    def container_id(self) -> str | None:
        return None if self._container is None else self._container.id

    def start(self) -> Inspector:
        target = self.host.handle.container_id
        try:
            host = self._client.containers.get(target)
            self._container = self._client.containers.run(
                self.image,
                detach=True,
                name=f"{host.name}-inspector-{secrets.token_hex(3)}",
                labels=self._labels(host.labels),
                pid_mode=f"container:{target}",
                network_mode=f"container:{target}",
                read_only=True,
                tmpfs={
                    "/tmp": f"size={self.limits.tmp_mb}m,mode=1777",
                    "/run": "size=4m,mode=0755",
                },
                cap_drop=["ALL"],
                cap_add=list(CAPABILITIES),
                security_opt=["no-new-privileges"],
                mem_limit=f"{self.limits.memory_mb}m",
                memswap_limit=f"{self.limits.memory_mb}m",
                nano_cpus=int(self.limits.cpus * 1e9),
                pids_limit=self.limits.pids,
                # Gone by itself if this process dies between start and removal;
                # the labels let `fixos clean` and the sweep of dead runs find it too.
                auto_remove=True,
            )
            self._shell = ExecShell(
                self._client.api, self._container.id, default_timeout=self._default_timeout
            )
        except (DockerException, OSError) as exc:
            self.close()
            raise StackError(f"cannot start an inspector for host {self.host.name}: {exc}") from None
        except BaseException:
            self.close()
            raise
        return self

    def _labels(self, host_labels: dict[str, str]) -> dict[str, str]:
        # The host's run and episode, but this process as owner: if it dies, the
        # sweep of dead runs must find the inspector even when the host lives on.
        labels = {k: v for k, v in host_labels.items() if k in (LABEL_RUN, LABEL_EPISODE)}
        labels[LABEL_OWNER] = owner_label()
        labels[LABEL_ROLE] = ROLE
        return labels

    def close(self) -> None:
        """Close the session and remove the container; safe to call twice."""
        shell, self._shell = self._shell, None
        if shell is not None:
            with contextlib.suppress(Exception):
                shell.close()
        container, self._container = self._container, None
        if container is not None:
            # auto_remove may already be removing it (409): either way it goes.
            with contextlib.suppress(NotFound, APIError):
                container.remove(force=True)

    def __enter__(self) -> Inspector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def inspecting(
    client: docker.DockerClient, hosts: Mapping[str, LiveHost], image: str, **options: Any
) -> Iterator[dict[str, Inspector]]:
    """One inspector per host, started side by side (the engine answers them at once) and
    all removed on leaving, also when one of them could not start."""
    inspectors = {name: Inspector(client, host, image, **options) for name, host in hosts.items()}
    try:
        with ThreadPoolExecutor(max_workers=max(1, len(inspectors))) as starters:
            # list(): wait for every start, so none is left half-made when one fails
            outcomes = list(starters.map(_try_start, inspectors.values()))
        for error in outcomes:
            if error is not None:
                raise error
        yield inspectors
    finally:
        for inspector in inspectors.values():
            inspector.close()


def _try_start(inspector: Inspector) -> BaseException | None:
    try:
        inspector.start()
    except BaseException as exc:  # re-raised by the caller once every start has ended
        return exc
    return None
