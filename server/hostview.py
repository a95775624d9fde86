"""The live host as a monitor sees it: one probe script, run through a session of its
own (never the agent's), parsed into processes, services, disks and resources.

CPU use is measured between two probes from /proc/*/stat, so a step costs no sampling
delay; the first probe of an episode samples for half a second.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from .models import DiskInfo, ProcessInfo, ServiceInfo

MOUNTS = ("/", "/var/log")
HIGH_CPU = 30.0
"""percent of one core from which a process counts as a CPU hog (the verifier's `no_cpu_hog` default)."""

_SCRIPT = r"""
me=$$
echo @@uptime; cut -d' ' -f1 /proc/uptime
echo @@stat
snap() { for f in /proc/[0-9]*/stat; do read -r l < "$f" 2>/dev/null && echo "$l"; done; }
{sample}
echo @@ps; ps -eo pid=,ppid=,user=,rss=,args= 2>/dev/null | awk -v me="$me" '$1 != me && $2 != me'
echo @@svc
for s in {services}; do service "$s" status >/dev/null 2>&1; echo "$s $?"; done
echo @@df; df -P -k {mounts} 2>/dev/null | tail -n +2
echo @@dfi; df -P -i {mounts} 2>/dev/null | tail -n +2
echo @@mem
cat /sys/fs/cgroup/memory.current /sys/fs/cgroup/memory.max 2>/dev/null ||
  cat /sys/fs/cgroup/memory/memory.usage_in_bytes /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null
echo @@end
"""


def probe_script(services: Sequence[str], *, first: bool) -> str:
    # The first probe has no earlier counters to compare with: sample twice, 0.5 s apart.
    sample = (
        "snap; sleep 0.5; echo @@uptime2; cut -d' ' -f1 /proc/uptime; echo @@stat2; snap" if first else "snap"
    )
    return (
        _SCRIPT.replace("{sample}", sample)
        .replace("{services}", " ".join(shlex.quote(s) for s in services))
        .replace("{mounts}", " ".join(MOUNTS))
    )


@dataclass(frozen=True)
class HostView:
    """One probe's parse; ``ticks`` keeps the CPU counters for the next probe."""

    uptime: float = 0.0
    ticks: dict[int, int] = field(default_factory=dict)
    processes: list[ProcessInfo] = field(default_factory=list)
    services: list[ServiceInfo] = field(default_factory=list)
    disks: list[DiskInfo] = field(default_factory=list)
    memory_mb: float = 0.0
    memory_percent: float = 0.0
    error: str = ""

    @property
    def running(self) -> set[str]:
        return {s.name for s in self.services if s.status == "running"}

    @property
    def hogs(self) -> set[int]:
        return {p.pid for p in self.processes if p.cpu_percent >= HIGH_CPU}

    @property
    def pids(self) -> set[int]:
        return {p.pid for p in self.processes}

    @property
    def disk_percent(self) -> float:
        return max((d.used_percent for d in self.disks), default=0.0)

    def resources(self) -> dict[str, float]:
        return {
            "cpu_percent": round(sum(p.cpu_percent for p in self.processes), 1),
            "memory_mb": round(self.memory_mb, 1),
            "memory_percent": round(self.memory_percent, 1),
            "disk_percent": round(self.disk_percent, 1),
        }


def _sections(output: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        if line.startswith("@@"):
            current = line[2:].strip()
            sections[current] = []
        elif current is not None and line.strip():
            sections[current].append(line)
    return sections


def _ticks(lines: list[str]) -> dict[int, int]:
    ticks = {}
    for line in lines:
        head, _, tail = line.rpartition(")")
        fields = tail.split()
        pid = head.split(" ", 1)[0]
        if pid.isdigit() and len(fields) > 12 and fields[11].isdigit() and fields[12].isdigit():
            ticks[int(pid)] = int(fields[11]) + int(fields[12])
    return ticks


def _float(lines: list[str], default: float = 0.0) -> float:
    try:
        return float(lines[0])
    except (IndexError, ValueError):
        return default


def parse(output: str, previous: HostView | None, *, hz: int = 100) -> HostView:
    """A HostView from the probe's output; CPU is the change since ``previous``."""
    s = _sections(output)
    if "end" not in s:
        return HostView(error="the host probe did not finish: " + output.strip()[-200:])
    uptime = _float(s.get("uptime2") or s.get("uptime", []))
    ticks = _ticks(s.get("stat2") or s.get("stat", []))
    if "stat2" in s:
        before, since = _ticks(s["stat"]), _float(s["uptime"])
    elif previous is not None and not previous.error:
        before, since = previous.ticks, previous.uptime
    else:
        before, since = {}, uptime
    elapsed = uptime - since
    processes = []
    for line in s.get("ps", []):
        parts = line.split(None, 4)
        if len(parts) < 5 or not parts[0].isdigit():
            continue
        pid = int(parts[0])
        cpu = 0.0
        if elapsed > 0 and pid in ticks and pid in before:
            cpu = max(0.0, (ticks[pid] - before[pid]) * 100.0 / hz / elapsed)
        processes.append(
            ProcessInfo(
                pid=pid,
                user=parts[2],
                cpu_percent=round(cpu, 1),
                memory_mb=round(int(parts[3]) / 1024, 1) if parts[3].isdigit() else 0.0,
                command=parts[4][:200],
            )
        )
    services = []
    for line in s.get("svc", []):
        name, _, code = line.rpartition(" ")
        services.append(ServiceInfo(name=name, status="running" if code == "0" else "stopped"))
    inodes = {}
    for line in s.get("dfi", []):
        parts = line.split()
        if len(parts) >= 6:
            inodes[parts[5]] = float(parts[4].rstrip("%") or 0) if parts[4] != "-" else 0.0
    disks = []
    for line in s.get("df", []):
        parts = line.split()
        if len(parts) >= 6 and parts[1].isdigit() and parts[2].isdigit():
            size, used = int(parts[1]) / 1024, int(parts[2]) / 1024
            disks.append(
                DiskInfo(
                    mount=parts[5],
                    size_mb=round(size, 1),
                    used_mb=round(used, 1),
                    used_percent=float(parts[4].rstrip("%")),
                    inodes_used_percent=inodes.get(parts[5], 0.0),
                )
            )
    mem = s.get("mem", [])
    memory_mb = memory_percent = 0.0
    if mem and mem[0].isdigit():
        memory_mb = int(mem[0]) / 2**20
        if len(mem) > 1 and mem[1].isdigit():
            memory_percent = 100.0 * int(mem[0]) / int(mem[1])
    return HostView(uptime, ticks, processes, services, disks, memory_mb, memory_percent)
