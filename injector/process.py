"""Rogue processes: CPU hogs, a memory hog, a squatter on a service's port, a watchdog.

Culprits live where real ones do (``culprit_path``): a vendor's /opt tree, a
site's /srv, a package's /usr/lib, an operator's home, /usr/local/bin. The
healthy host runs innocent programs in such places too (``INNOCENT_PROGRAMS``),
some with the same names, so neither a path nor a name gives a culprit away.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from ..core.models import Outcome
from ..core.words import word, words
from ..shells.base import Shell
from ..shells.probes import sample_cpu
from .base import FAULTS, Fault, FaultParams, PidWord, plain_pid
from .edit import install_script, spawn_with_pid
from .service import stop_service

INNOCENT_PROGRAMS = {
    "/opt/nodewatch/bin/metrics-agent",
    "/usr/lib/shop/queue-worker",
    "/usr/local/bin/log-shipper",
    "/usr/local/sbin/shop-backup",
}
"""the healthy host's own background programs (images/server/rootfs): never a culprit's path"""

_CULPRIT_DIRS = [
    "/usr/local/bin",
    "/opt/{vendor}/bin",
    "/opt/{vendor}/{name}",
    "/srv/{site}/bin",
    "/usr/lib/{name}",
    "/usr/lib/shop",
    "/home/deploy/bin",
    "/home/deploy/.local/bin",
]
_VENDORS = ["nodewatch", "acme", "reportly", "datapipe", "shoptools"]
_SITES = ["shop", "jobs", "legacy", "admin"]


def culprit_path(rng: random.Random, name: str) -> str:
    """Where a culprit program ``name`` is installed, drawn from the seed: never
    where one of the host's innocent programs lives."""
    while True:
        folder = rng.choice(_CULPRIT_DIRS).format(
            vendor=rng.choice(_VENDORS), site=rng.choice(_SITES), name=name
        )
        path = f"{folder}/{name}"
        if path not in INNOCENT_PROGRAMS:
            return path


class Culprit:
    """Shared by the faults whose culprit is one program started from a seeded path (a
    mixin, not a Fault: every Fault class is a registered type): what it records, and
    the reference repair that kills it."""

    records = ("name", "pid", "path")

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.name = ""
        """the culprit's program and where it is installed, drawn from the seed"""
        self.path = ""
        self.pid: int | None = None
        """where inject started it"""

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The culprit killed, by the PID it recorded."""
        return f"kill {word(seeded['pid'])}"


HOG_NAMES = [
    "report-builder",
    "thumb-worker",
    "search-reindex",
    "cache-warmer",
    "log-shipper",
    "backup-verify",
    "feed-importer",
]
SQUATTER_NAMES = ["legacy-admin", "status-panel", "dev-proxy", "metrics-gateway", "old-storefront"]


@FAULTS.register
class CpuHog(Fault):
    """Busy processes with plausible names, each burning a whole core.

    With ``pids`` each runs as exactly that PID (the task says "pid 909"); the
    name is drawn from the seed.
    """

    type = "cpu_hog"
    records = ("processes",)

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """Every hog killed, by the PIDs it recorded."""
        return "kill " + words(p["pid"] for p in seeded["processes"])

    class Params(FaultParams):
        count: int = Field(default=1, ge=1, le=4)
        pids: list[int] | None = None
        min_percent: int = Field(default=50, ge=10, le=100)
        """proof it burns: CPU demand (on a CPU or waiting for one); a busy machine cannot hide it."""

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.names: list[str] = []
        """the hogs' programs and where they are installed, drawn from the seed"""
        self.paths: list[str] = []
        self.hogs: list[tuple[str, int]] = []
        """(program, PID) of each hog inject started"""

    def prepare(self, shell: Shell, rng: random.Random) -> None:
        count = len(self.params.pids) if self.params.pids else self.params.count
        self.names = rng.sample(HOG_NAMES, count)
        self.paths = [culprit_path(rng, name) for name in self.names]
        for path in self.paths:
            install_script(shell, path, "#!/bin/sh\n# batch job\nwhile :; do :; done\n")

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        self.hogs = []
        for i, name in enumerate(self.names):
            pid = spawn_with_pid(shell, self.paths[i], self.params.pids[i] if self.params.pids else None)
            self.hogs.append((name, pid))
        rows = zip(self.hogs, self.paths, strict=True)
        return {"processes": [{"name": n, "pid": p, "path": path} for (n, p), path in rows]}

    def confirm(self, shell: Shell) -> Outcome:
        if not self.hogs:
            return Outcome(False, "no hog started")
        demand = {row.pid: row.percent for row in sample_cpu(shell)}
        seen = []
        for name, pid in self.hogs:
            comm = shell.run(f"cat /proc/{pid}/comm", timeout=5).output.strip()
            if comm != name:
                return Outcome(False, f"PID {pid} is {comm or 'gone'}, not {name}")
            cpu = demand.get(pid, 0)
            if cpu < self.params.min_percent:
                return Outcome(False, f"{name} (PID {pid}) wants {cpu}% of a core")
            seen.append(f"{name} PID {pid} wants {cpu}% of a core")
        return Outcome(True, "; ".join(seen))

    def revert(self, shell: Shell) -> None:
        for _, pid in self.hogs:
            shell.run(f"kill -KILL {pid}")


_SQUATTER = """#!/usr/bin/perl
# Old admin panel, kept "just in case".
use IO::Socket::INET;
my $s = IO::Socket::INET->new(LocalPort => {port}, Listen => 16, ReuseAddr => 1) or die "bind: $!";
while (my $c = $s->accept) {{
    print $c "HTTP/1.0 503 Service Unavailable\\r\\nContent-Type: text/plain\\r\\n\\r\\nmaintenance\\r\\n";
    close $c;
}}
"""


@FAULTS.register
class PortSquatter(Culprit, Fault):
    """Another program holds the service's port, so the service cannot start again."""

    type = "port_squatter"

    class Params(FaultParams):
        service: Literal["nginx"] = "nginx"
        port: int = 80
        pid: int | None = None

    def prepare(self, shell: Shell, rng: random.Random) -> None:
        self.name = rng.choice(SQUATTER_NAMES)
        self.path = culprit_path(rng, self.name)
        install_script(shell, self.path, _SQUATTER.format(port=self.params.port))
        stop_service(shell, self.params.service)

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        self.pid = spawn_with_pid(shell, self.path, self.params.pid)
        shell.run(
            f"for i in $(seq 1 50); do ss -Hltn 'sport = :{self.params.port}' | grep -q . && break; "
            "sleep 0.1; done",
            timeout=10,
        )
        # The restart an operator would try: it fails on bind() and says so in the log.
        shell.run(f"service {self.params.service} start", timeout=30)
        return {"name": self.name, "pid": self.pid, "path": self.path}

    def confirm(self, shell: Shell) -> Outcome:
        owners = shell.run(f"ss -Hltnp 'sport = :{self.params.port}'", timeout=5).output
        if f'"{self.name}"' not in owners and f"pid={self.pid}," not in owners:
            return Outcome(False, f"port {self.params.port} is not held by {self.name}: {owners[:200]}")
        status = shell.run(f"service {self.params.service} status", timeout=10)
        if status.exit_code == 0:
            return Outcome(False, f"{self.params.service} is running despite the squatter")
        return Outcome(
            True,
            f"{self.name} (PID {self.pid}) holds port {self.params.port}; {self.params.service} down",
        )

    def revert(self, shell: Shell) -> None:
        if self.pid is not None:
            shell.run(f"kill -KILL {self.pid}; service {self.params.service} start", timeout=30)


def located(seeded: Mapping[str, Any]) -> str:
    """What a ``PidWord`` is told to find a seeded process by: its program's path
    (a bare name, in /usr/local/bin, for faults recorded before paths were seeded)."""
    return str(seeded.get("path") or seeded["name"])


_RSS_MB = "awk '/VmRSS/ {{print int($2/1024)}}' /proc/{pid}/status"
"""a process's resident memory in MB"""

_MEMORY_HOG = """#!/usr/bin/perl
# In-memory cache of the product catalogue, "warmed" once and never trimmed.
my @cache = map {{ "x" x (1024 * 1024) }} 1 .. {mb};
sleep 3600 while 1;
"""


@FAULTS.register
class MemoryHog(Culprit, Fault):
    """A process holds most of the host's memory (the share is seeded within a range)."""

    type = "memory_hog"
    records = ("name", "pid", "path", "mb")

    class Params(FaultParams):
        min_mb: int = Field(default=250, ge=16)
        max_mb: int = Field(default=320, ge=16)

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.mb = 0
        """the MB the hog fills, drawn from the seed"""

    def prepare(self, shell: Shell, rng: random.Random) -> None:
        self.name = rng.choice(
            ["catalog-cache", "image-resizer", "session-store", "search-index", "queue-worker"]
        )
        self.path = culprit_path(rng, self.name)
        self.mb = rng.randint(self.params.min_mb, self.params.max_mb)
        install_script(shell, self.path, _MEMORY_HOG.format(mb=self.mb))

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        self.pid = spawn_with_pid(shell, self.path, None)
        return self._seeded()

    def _seeded(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "path": self.path, "mb": self.mb}

    def symptom(self, seeded: Mapping[str, Any], pid: PidWord = plain_pid) -> str:
        # Filling takes a moment: the hog holds nine tenths of what it was told to.
        rss = _RSS_MB.format(pid=pid(located(seeded), seeded["pid"]))
        return f'[ "$({rss})" -ge {int(seeded["mb"] * 0.9)} ]'

    def confirm(self, shell: Shell) -> Outcome:
        if self.pid is None:
            return Outcome(False, f"{self.name or 'the hog'} not started")
        holds = shell.run(self.symptom(self._seeded())).ok
        rss = shell.run(_RSS_MB.format(pid=self.pid)).output.strip()
        return Outcome(holds, f"{self.name} (PID {self.pid}) holds {rss} MB")

    def revert(self, shell: Shell) -> None:
        if self.pid is not None:
            shell.run(f"kill {self.pid}")


_KILLER = """#!/bin/sh
# Legacy watchdog from the old hosting setup: "restarts" the web server when
# the old health URL fails, which it always does now.
while :; do
    pkill -x {program} >/dev/null 2>&1
    sleep {interval}
done
"""


@FAULTS.register
class ServiceKiller(Culprit, Fault):
    """A forgotten watchdog kills the service every few seconds: a plain restart
    only helps until its next round."""

    returns = True

    type = "service_killer"

    class Params(FaultParams):
        service: Literal["nginx"] = "nginx"
        interval: float = Field(default=2.0, gt=0.2, le=30)

    def prepare(self, shell: Shell, rng: random.Random) -> None:
        self.name = rng.choice(["web-watchdog", "hosting-agent", "uptime-guard", "site-keeper"])
        self.path = culprit_path(rng, self.name)
        install_script(
            shell,
            self.path,
            _KILLER.format(interval=self.params.interval, program=self.params.service),
        )

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        self.pid = spawn_with_pid(shell, self.path, None)
        return {"name": self.name, "pid": self.pid, "path": self.path}

    def symptom(self, seeded: Mapping[str, Any], pid: PidWord = plain_pid) -> str:
        # The watchdog's first round kills at once (a reset need not wait out its period);
        # it must still be there.
        service = shlex.quote(self.params.service)
        return f"! service {service} status >/dev/null 2>&1 && kill -0 {pid(located(seeded), seeded['pid'])}"

    def confirm(self, shell: Shell) -> Outcome:
        if self.pid is None:
            return Outcome(False, f"{self.name or 'the watchdog'} not started")
        ok = shell.run(self.symptom({"name": self.name, "pid": self.pid, "path": self.path})).ok
        return Outcome(ok, f"{self.name} (PID {self.pid}) keeps killing {self.params.service}")

    def revert(self, shell: Shell) -> None:
        if self.pid is not None:
            shell.run(f"kill {self.pid}; service {self.params.service} start")
