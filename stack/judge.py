"""One long-lived judge per engine and process: the verifier's vantage point on every
host, without a container start per judgement.

The judge is one container from the inspector image (``images/inspector``: only
tools that read state), in the engine machine's PID namespace (``pid=host``), with a
read-only root. A judgement of a host is a session in it. That session is one
``docker exec`` that enters the host's PID and network namespaces (``nsenter``),
forks into them and mounts a ``/proc`` of that PID namespace in a mount namespace
of its own (``unshare --fork``, which reaps it however the host signals it), then
runs the judge's own ``bash``. Where this machine is the engine's, a session is not a
``docker exec`` but a connection to the judge's socket (``/run/judge.sock``, reached
through ``/proc/<judge>/root``), whose server forks the same command line
(``fixos.shells.unix``): ~4 ms instead of the engine's ~70 CPU-ms. Seen from that session, as from
an inspector, ``ps`` and ``/proc`` are the host's processes, ``ss`` its sockets,
and ``/proc/1/root`` its filesystem, all read with the judge's own programs.

What root inside a host can and cannot do (the same as to an inspector, less):
- it cannot see, signal or replace the judge itself: its process lives in the
  engine's PID namespace, outside every host's.
- it sees the processes of a session while that session judges it, and can kill
  them. The judgement then fails closed: every check of that host fails, and the
  episode is scored (``fixos.episodes.inspection``).
- it cannot reach into a session. Hosts have no ``CAP_SYS_PTRACE`` (the scenario
  schema allows ``NET_ADMIN`` only), and a session holds capabilities the host's
  root lacks, so ``/proc/<pid>/root``, ``mem`` and ``fd`` of a session are closed
  to it.
- its fork bomb or memory hog does not reach the judge, which runs in a cgroup of
  its own (``JudgeLimits``).

Capabilities, each for one reason:
- ``SYS_PTRACE``: to open ``/proc/<pid>/root``, ``exe``, ``cwd`` and ``fd`` of a
  host's processes.
- ``DAC_READ_SEARCH``: to list the ``fd`` of processes that are not root's, and to
  read files only their owner may read.
- ``SYS_ADMIN``: ``setns`` into a host's PID and network namespaces, and the mount of
  its ``/proc`` in the session's private mount namespace.

Nothing else is granted (``cap_drop: ALL``, ``no-new-privileges``).

Where the engine forbids this (user-namespace remapping, a security profile that
denies ``mount`` or ``setns``), ``Judge.usable`` is False and says why in one line.
The verdicts then use today's inspector per host and judgement.

The judge carries the run's ``fixos.run`` (one judge per warm pool, that is per run
and engine, or per episode without a pool) and this process as ``fixos.owner``. It is
removed by ``close()``, with the run's other objects (``remove_labelled``), by the
sweep of dead runs once this process is gone (SIGKILL included), and by ``fixos clean``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, DockerException, NotFound

from ..core.errors import ShellError, StackError
from ..records.config_answers import ConfigAnswers
from ..shells.base import Shell
from ..shells.exec import ExecShell
from ..shells.unix import UnixShell
from .hosts import LABEL_OWNER, LABEL_RUN, LiveHost
from .names import owner_label
from .sockets import unix_listens

log = logging.getLogger(__name__)

LABEL_ROLE = "fixos.role"
SOCKET = "/run/judge.sock"
SERVE = [
    "socat",
    f"UNIX-LISTEN:{SOCKET},fork,mode=600,backlog=256",
    "EXEC:/usr/local/sbin/judge-serve,nofork",
]
"""The judge's main process: a fork of judge-serve per connection to its socket."""
SOCKET_WAIT = 2.0
"""how long socat may take to make its socket once the container runs."""
ROLE = "judge"
CAPABILITIES = ("SYS_PTRACE", "DAC_READ_SEARCH", "SYS_ADMIN")
# The session resolves names as the host does: with its /etc/hosts and resolv.conf (the
# files the engine mounted in it, which a DNS fault edits and the host's own programs
# read), copied into a tmpfs of the session's own mount namespace that is bound over the
# judge's (the kernel refuses to bind a file of another mount namespace). Only regular
# files are copied, 64 KiB at most, within a second; a FIFO, a directory or a link
# planted there leaves the copy empty: names then do not resolve, and the checks that
# need them fail. A kept session copies them again at each judgement (REFRESH_NAMES,
# written in place so the binds stay): a copy from the first judgement, the fault's
# /etc/hosts, once failed a repaired host's db_reachable.
NAME_FILES = ("/etc/hosts", "/etc/resolv.conf")


def _copy_name_file(path: str) -> str:
    source, copy = f"/proc/1/root{path}", f"/run/{path.rsplit('/', 1)[1]}"
    return (
        f"if [ -f {source} ] && [ ! -L {source} ]; then "
        f"timeout 1 head -c 65536 {source} > {copy} 2>/dev/null || : > {copy}; else : > {copy}; fi;"
    )


REFRESH_NAMES = " ".join(_copy_name_file(path) for path in NAME_FILES)
"""What a kept session runs before each judgement: the host's name files copied again."""
_BINDS = " && ".join(
    f": > /run/{name} && mount --bind /run/{name} {path}"
    for path, name in ((path, path.rsplit("/", 1)[1]) for path in NAME_FILES)
)
_NAMES = f"mount -t tmpfs -o size=256k,mode=0755 names /run && {{ {_BINDS}; {REFRESH_NAMES} }}"
_MOUNT_PROC = (
    f'mount -t proc -o nosuid,nodev,noexec proc /proc && {{ {_NAMES} 2>/dev/null; true; }} && exec "$@"'
)


@dataclass(frozen=True)
class JudgeLimits:
    """The judge's own cgroup, shared by every session of every episode of this process."""

    pids: int = 16384
    memory_mb: int = 8192
    """64 OpenEnv sessions of three hosts, each with up to three kept sessions per host
    (``fixos.shells.watched.SessionPool``) and a dozen probes at once: room for every session's
    unshare, bash and tools (about 10 MiB and 15 processes per host and session). A limit,
    not a reservation."""
    cpus: float = 2.0


def enter_host(pid: int) -> list[str]:
    """The argv prefix that runs a command in the namespaces of the host whose init is ``pid``
    (as the engine numbers it), with a ``/proc`` of that host's PID namespace."""
    # nsenter sets the PID namespace for children only and, with --no-fork, does not wait
    # on one: when its own child stops, nsenter stops itself too (job control), and root in
    # the host can stop every process it sees (killall5 at halt does), which would leave a
    # zombie of the host that nothing reaps and a host the engine cannot remove. unshare
    # --fork makes the child and reaps it with a plain wait, however it is stopped.
    return [
        "nsenter",
        f"--target={pid}",
        "--pid",
        "--net",
        "--no-fork",
        "--",
        "unshare",
        "--mount",
        "--propagation=private",
        "--fork",
        "--kill-child",
        "--",
        "sh",
        "-c",
        _MOUNT_PROC,
        "judge",
    ]


def local_socket(pid: int, container_id: str) -> str | None:
    """The judge's socket through its root as this machine sees it, where the engine runs
    here: the process the engine names is this machine's and in the judge's cgroup (an
    engine elsewhere numbers its processes in another machine's PID space). None elsewhere,
    or under ``FIXOS_JUDGE_SESSIONS=exec`` (the sessions of before, for A/B figures)."""
    if os.environ.get("FIXOS_JUDGE_SESSIONS") == "exec":
        return None
    try:
        if container_id not in Path(f"/proc/{pid}/cgroup").read_text():
            return None
    except OSError:
        return None
    path = f"/proc/{pid}/root{SOCKET}"
    deadline = time.monotonic() + SOCKET_WAIT
    # Until it listens, not until the file is there: socat's bind() makes the file a moment
    # before its listen(), and a session opened between them was refused (one episode in 16
    # started 4 at a time, each with its own judge, fell back to inspectors). Read from its
    # network namespace's table: a connection to ask would fork a judge-serve for nothing.
    while not unix_listens(pid, SOCKET):
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)
    return path


class Judge:
    """The judge of one engine for this process; started on first use, thread-safe."""

    def __init__(
        self,
        client: docker.DockerClient,
        image: str,
        *,
        run_id: str,
        limits: JudgeLimits | None = None,
        default_timeout: float = 20.0,
    ) -> None:
        self._client = client
        self._image = image
        self._limits = limits or JudgeLimits()
        self._default_timeout = default_timeout
        self._lock = threading.Lock()
        self.lent = ConfigAnswers()
        """answers its judgements lend from one host to another of the same image (``Probe.across``),
        kept on disk for later runs (``fixos.records.config_answers``)"""
        self._container: Any = None
        self._socket: str | None = None
        """its socket as this machine reaches it, where it does (``local_socket``)."""
        self._closed = False
        self.run_id = run_id
        """the run it serves: removed with that run's other objects (``remove_labelled``)."""
        self.why_not: str | None = None
        """why this engine cannot have a judge (then ``usable`` is False), once tried."""

    @property
    def client(self) -> docker.DockerClient:
        return self._client

    @property
    def usable(self) -> bool:
        with self._lock:
            if self._container is None and self.why_not is None and not self._closed:
                self._start()
            return self._container is not None

    def _start(self) -> None:
        try:
            self._container = self._client.containers.run(
                self._image,
                detach=True,
                name=f"fixos-{self.run_id}-judge-{secrets.token_hex(3)}",
                labels={LABEL_RUN: self.run_id, LABEL_OWNER: owner_label(), LABEL_ROLE: ROLE},
                pid_mode="host",
                network_mode="none",
                read_only=True,
                tmpfs={"/tmp": "size=16m,mode=1777", "/run": "size=16m,mode=0755"},
                cap_drop=["ALL"],
                cap_add=list(CAPABILITIES),
                security_opt=["no-new-privileges"],
                mem_limit=f"{self._limits.memory_mb}m",
                memswap_limit=f"{self._limits.memory_mb}m",
                nano_cpus=int(self._limits.cpus * 1e9),
                pids_limit=self._limits.pids,
                auto_remove=True,
                command=SERVE,
            )
            # Proof that this engine lets it in: entering the judge's own namespaces (as a
            # host's are entered) and mounting their /proc must work.
            self._container.reload()
            own = int(self._container.attrs["State"]["Pid"])
            self._socket = local_socket(own, self._container.id)
            said, code = self._prove(own)
            if code != 0:
                raise StackError(f"entering a namespace failed: {said.strip()[-200:]}")
        except (DockerException, StackError, ShellError, OSError) as exc:
            self.why_not = f"{type(exc).__name__}: {exc}"[:300]
            log.warning(
                "engine cannot run a long-lived judge (%s): each judgement starts inspectors", self.why_not
            )
            self._remove()

    def _prove(self, own: int) -> tuple[str, int]:
        """What entering the judge's own namespaces says, and its exit code."""
        if self._socket is not None:
            with UnixShell(self._socket, prefix=enter_host(own), default_timeout=10.0) as shell:
                result = shell.run("true")
            return result.output, result.exit_code
        probe = self._client.api.exec_create(self._container.id, [*enter_host(own), "true"])["Id"]
        out = self._client.api.exec_start(probe)
        return out.decode(errors="replace"), int(self._client.api.exec_inspect(probe).get("ExitCode") or 0)

    def session(self, host: LiveHost) -> Shell:
        """A new session judging ``host``. StackError when the host is gone, or the judge
        died and cannot be started again (the harness's failure); ShellError or StackError
        with the judge well when the session does not open (the host's doing: a kill loop)."""
        if not self.usable:
            raise StackError(f"no judge on this engine: {self.why_not}")
        try:
            pid = int(self._client.api.inspect_container(host.handle.container_id)["State"]["Pid"] or 0)
        except (DockerException, KeyError, ValueError) as exc:
            raise StackError(f"cannot find host {host.name}'s init: {exc}") from None
        if pid <= 0:
            raise StackError(f"host {host.name} is not running")
        for attempt in (1, 2):
            container = self._container
            try:
                prefix, timeout = enter_host(pid), self._default_timeout
                if self._socket is not None:
                    return UnixShell(self._socket, prefix=prefix, default_timeout=timeout)
                return ExecShell(self._client.api, container.id, prefix=prefix, default_timeout=timeout)
            except (ShellError, DockerException) as exc:
                if self.alive():
                    raise  # the judge is well: what failed is the host's to answer for
                if attempt == 2:
                    raise StackError(f"the judge is gone and does not come back: {exc}") from None
                with self._lock:  # the harness's failure (the judge died): one new judge, once
                    if self._container is container and not self._closed:
                        self._remove()
                        self._start()
                if self._container is None:
                    raise StackError(f"the judge of this engine is gone: {self.why_not or exc}") from None
        raise AssertionError("unreachable")

    def alive(self) -> bool:
        """Whether the judge's container still runs (the engine's word)."""
        container = self._container
        if container is None:
            return False
        try:
            return self._client.api.inspect_container(container.id)["State"]["Running"] is True
        except (DockerException, KeyError):
            return False

    def _remove(self) -> None:
        container, self._container, self._socket = self._container, None, None
        if container is not None:
            with contextlib.suppress(NotFound, APIError):
                container.remove(force=True)

    def close(self) -> None:
        """Remove the judge; safe to call twice (and a closed judge is not started again)."""
        with self._lock:
            self._closed = True
            self._remove()

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
