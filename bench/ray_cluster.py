"""A Ray cluster on this one machine whose nodes each have their own Docker engine: for the
two-node test and ``make perf``, and a worked example of starting one by hand.

Each node is ``ray start --block`` in a session of its own, stopped by killing that group and
every process descended from it: ``ray stop`` would stop every Ray node on the machine, other
people's included. A
second node runs in the network namespace of a second engine (``scripts/netns-engine``),
so its 127.0.0.1, where its tasks reach their hosts, is that engine's loopback; the head
then listens on this side's veth address, the one address both namespaces reach. Nothing
talks beyond this machine: usage stats are off and no dashboard is started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import FixOSError

QUIET = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1"}
"""no usage report leaves the machine, no warning about the containers' CPU count."""
START_WAIT = 90.0


def ray_command() -> str:
    """The ``ray`` beside this Python (the venv's), else the one on PATH."""
    import sys

    here = Path(sys.executable).parent / "ray"
    found = str(here) if here.exists() else shutil.which("ray")
    if found is None:
        raise FixOSError("ray is not installed: pip install 'fixos[ray]'")
    return found


@dataclass
class LocalNode:
    """One ``ray start --block`` process group and the temp dir it owns."""

    process: subprocess.Popen
    temp_dir: Path
    engine: str
    log: Path

    def stop(self) -> None:
        """Every process of the node: the group, and its descendants in groups of their own
        (Ray starts each worker in a new session); TERM, then KILL what is left after 5 s."""
        family = _group(self.process.pid)  # those the leader's exit left to init are in it still
        if self.process.returncode is None:  # not reaped: its pid is not someone else's yet
            family |= {self.process.pid} | _descendants(self.process.pid)
        for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            for pid in family:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                self.process.poll()
                family = {pid for pid in family if _running(pid)}
                if not family:
                    break
                time.sleep(0.1)
        self.process.poll()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _start(args: Sequence[str], *, engine: str | None, slots: int, netns: str | None) -> LocalNode:
    temp_dir = Path(tempfile.mkdtemp(prefix="fxray-", dir="/tmp"))  # short: Ray's socket paths
    # TMPDIR: an episode's scratch dir lives in the node's temp dir, so a task killed with
    # its node (no finally ran) leaves nothing once the node is stopped
    env = {**os.environ, **QUIET, "TMPDIR": str(temp_dir)}
    env.pop("RAY_ADDRESS", None)
    if engine:
        env["DOCKER_HOST"] = engine  # the node's workers inherit it: that node's engine
    else:
        env.pop("DOCKER_HOST", None)
    command = [
        ray_command(), "start", "--block", *args, f"--temp-dir={temp_dir}",
        f"--resources={json.dumps({'fixos_engine': slots})}", "--num-cpus=1",
        "--object-store-memory=100000000", "--disable-usage-stats",
    ]  # fmt: skip
    if netns:  # nsenter --net, not `ip netns exec` (whose fresh /sys hides the cgroup mounts)
        command = ["nsenter", f"--net=/run/netns/{netns}", *command]
    log = temp_dir / "start.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return LocalNode(process, temp_dir, engine or "local", log)


def free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


@dataclass
class LocalCluster:
    """A head node (this machine's engine) and workers in network namespaces."""

    head_ip: str
    port: int
    nodes: list[LocalNode] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"{self.head_ip}:{self.port}"

    def start_head(self, engine: str | None = None, slots: int = 2) -> None:
        args = [
            "--head",
            f"--node-ip-address={self.head_ip}",
            f"--port={self.port}",
            "--include-dashboard=false",
        ]
        self.nodes.append(_start(args, engine=engine, slots=slots, netns=None))
        self._wait(lambda: _port_open(self.head_ip, self.port), "the Ray head's port")

    def add_node(self, netns: str, ip: str, engine: str, slots: int = 2) -> None:
        args = [f"--address={self.address}", f"--node-ip-address={ip}"]
        self.nodes.append(_start(args, engine=engine, slots=slots, netns=netns))

    def wait_for(self, count: int) -> None:
        """Until ``count`` nodes offering engine slots are alive (asked from a subprocess, so
        this process stays free to be a driver later)."""
        probe = (
            "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
            "print(sum(1 for n in ray.nodes() if n['Alive'] and n['Resources'].get('fixos_engine')))"
        )
        python = Path(ray_command()).parent / "python"

        def ready() -> bool:
            out = subprocess.run(
                [str(python), "-c", probe, self.address],
                capture_output=True,
                text=True,
                env={**os.environ, **QUIET},
            )
            return out.returncode == 0 and out.stdout.strip().splitlines()[-1:] == [str(count)]

        self._wait(ready, f"{count} Ray node(s) with engines")

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.process.poll() is not None:  # the caller's stop() removes the rest
                    said = node.log.read_text(errors="replace").strip().splitlines()[-1:] or ["?"]
                    raise FixOSError(f"a Ray node exited: {said[0][:300]}")
            if ready():
                return
            time.sleep(0.5)
        raise FixOSError(f"{what} not up within {START_WAIT:.0f} s")

    def stop(self) -> None:
        for node in reversed(self.nodes):  # workers first: they would try to reach the head
            node.stop()
        self.nodes.clear()


def _stat_field(index: int) -> dict[int, int]:
    """One numeric field of /proc/PID/stat after "(comm)" (0 state, 1 ppid, 2 pgrp) per pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:  # "pid (comm) state ppid pgrp ...": comm may hold spaces, so split after ")"
                found[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[index])
            except (OSError, IndexError, ValueError):
                continue
    return found


def _parents() -> dict[int, int]:
    return _stat_field(1)


def _group(pgid: int) -> set[int]:
    return {pid for pid, group in _stat_field(2).items() if group == pgid}


def _descendants(root: int) -> set[int]:
    parents = _parents()
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie is gone but for its parent's wait)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _port_open(ip: str, port: int) -> bool:
    try:
        socket.create_connection((ip, port), timeout=1).close()
    except OSError:
        return False
    return True
