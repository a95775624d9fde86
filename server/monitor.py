"""How the server looks at an episode's login host after each step (``HostView``).

Where this machine reads the host's root (its engine is local), the probe script's
sections are built here from the files the script would read: the host's own /proc, its
pid files and /etc/passwd, its filesystems (``statvfs`` of / and /var/log) and its cgroup's
memory files, all resolved inside the host's root (``fixos.stack.host_files``), none of the
host's programs run. Why: run in the host, the script (``ps``, a ``service … status`` per
service, ``df``) cost ~250 ms and ~350 CPU-ms at every step, five times the step's running
score; read from here it costs a few milliseconds, and a forged ``ps`` or init script can
no longer hide a hog or a stopped service from the view the step's shaping reads. A service
is running when its pid file names a live process whose program is the packaged daemon.

Elsewhere (a remote engine) the script runs through a session of its own in the host,
never the agent's, as before.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence

from ..core.errors import ShellError, StackError
from ..stack.host_files import HostFiles, open_dir_in_root, open_in_root
from ..stack.hosts import LiveHost
from ..verifier.vantage import SERVICE_DAEMONS
from .hostview import MOUNTS, HostView, parse, probe_script

PROBE_TIMEOUT = 10.0
FIRST_SAMPLE = 0.5
"""seconds between the first look's two CPU readings (later looks compare with the last)."""
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024
_MEMORY_FILES = (
    ("/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.max"),
    ("/sys/fs/cgroup/memory/memory.usage_in_bytes", "/sys/fs/cgroup/memory/memory.limit_in_bytes"),
)


class Monitor:
    """The login host's monitor for one episode: ``look`` after each step."""

    def __init__(self, host: LiveHost, services: Sequence[str]) -> None:
        self._host = host
        self._services = list(services)
        self._files: HostFiles | None = host.local_files()
        self._probe = None
        """the script's own session in the host, opened at the first look that needs it."""

    def look(self, before: HostView | None, meanwhile: Callable[[], object] | None = None) -> HostView:
        """The host now (``before``: the last look, None for the first: CPU sampled twice).
        ``meanwhile`` runs in the first look's wait between its two CPU readings (before the
        script, where the host runs it); what it raises is not the look's to report."""
        try:
            if self._files is not None:
                return parse(self._outside(first=before is None, meanwhile=meanwhile), before)
            _run_quietly(meanwhile)
            if self._probe is None:
                self._probe = self._host.shell(default_timeout=PROBE_TIMEOUT)
            script = probe_script(self._services, first=before is None)
            result = self._probe.run(script, timeout=PROBE_TIMEOUT)
        except (ShellError, StackError, OSError) as exc:  # a host the agent broke badly is still judged
            return HostView(error=f"the host probe failed: {exc}")
        return parse(result.output, before)

    def close(self) -> None:
        if self._probe is not None:
            with contextlib.suppress(Exception):
                self._probe.close()
            self._probe = None

    # -- read from this machine -------------------------------------------------------------

    def _read(self, path: str, limit: int = 1 << 20) -> str:
        assert self._files is not None
        data = self._files.read(path, limit)
        return "" if data is None else data.decode("utf-8", "replace")

    def _outside(self, *, first: bool, meanwhile: Callable[[], object] | None) -> str:
        pids = self._pids()  # listed before ``meanwhile``: what it starts is not in this sample
        lines = ["@@uptime", self._read("/proc/uptime").partition(" ")[0], "@@stat"]
        lines += self._stats(pids)
        if first:
            waited = time.monotonic()
            _run_quietly(meanwhile)
            time.sleep(max(0.0, FIRST_SAMPLE - (time.monotonic() - waited)))
            lines += ["@@uptime2", self._read("/proc/uptime").partition(" ")[0]]
            lines += ["@@stat2", *self._stats(pids)]
        lines += ["@@ps", *self._ps(pids), "@@svc"]
        lines += [f"{s} {0 if self._running(s) else 3}" for s in self._services]
        lines += ["@@df", *self._df(inodes=False), "@@dfi", *self._df(inodes=True), "@@mem"]
        for current, limit in _MEMORY_FILES:
            used = self._read(current).strip()
            if used.isdigit():
                lines += [used, self._read(limit).strip()]
                break
        return "\n".join([*lines, "@@end", ""])

    def _pids(self) -> list[str]:
        """The host's processes, numbered as in the host: its own /proc, listed inside its root."""
        assert self._files is not None
        fd = open_dir_in_root(self._files.root_fd, "/proc")
        try:
            return sorted((name for name in os.listdir(fd) if name.isdigit()), key=int)
        finally:
            os.close(fd)

    def _stats(self, pids: Sequence[str]) -> list[str]:
        return [line for line in (self._read(f"/proc/{p}/stat").strip() for p in pids) if line]

    def _ps(self, pids: Sequence[str]) -> list[str]:
        """``ps -eo pid=,ppid=,user=,rss=,args=`` as the host's ps would print it."""
        users = {}
        for entry in self._read("/etc/passwd").splitlines():
            fields = entry.split(":")
            if len(fields) > 2 and fields[2].isdigit():
                users.setdefault(fields[2], fields[0])
        rows = []
        for pid in pids:
            stat, status = self._read(f"/proc/{pid}/stat"), self._read(f"/proc/{pid}/status")
            comm, _, rest = stat.rpartition(")")
            fields = rest.split()
            uid = next((line.split()[2] for line in status.splitlines() if line.startswith("Uid:")), "")
            if len(fields) < 22 or not uid:
                continue  # gone while read
            argv = self._read(f"/proc/{pid}/cmdline").replace("\0", " ").strip()
            args = argv or f"[{comm.partition('(')[2]}]"
            rss = int(fields[21]) * _PAGE_KB if fields[21].isdigit() else 0
            rows.append(f"{pid} {fields[1]} {users.get(uid, uid)} {rss} {args}")
        return rows

    def _running(self, service: str) -> bool:
        if service not in SERVICE_DAEMONS:
            return False
        assert self._files is not None
        pidfile, daemon = SERVICE_DAEMONS[service]
        pid = self._read(pidfile, 64).strip()
        if not pid.isdigit():
            return False
        try:  # the link's text, read through the host's own /proc (a mount: nothing to replace)
            return os.readlink(f"/proc/{self._files.pid}/root/proc/{pid}/exe") == daemon
        except OSError:
            return False

    def _df(self, *, inodes: bool) -> list[str]:
        """``df -P -k`` (or ``-i``) of the monitored mounts, from ``statvfs`` inside the root."""
        assert self._files is not None
        rows = []
        for mount in MOUNTS:
            try:
                handle = open_in_root(self._files.root_fd, mount)
                try:
                    fs = os.fstatvfs(handle)
                finally:
                    os.close(handle)
            except OSError:
                continue
            if inodes:
                total, free = fs.f_files, fs.f_ffree
            else:
                total, free = fs.f_blocks * fs.f_frsize // 1024, fs.f_bavail * fs.f_frsize // 1024
            used = total - (fs.f_ffree if inodes else fs.f_bfree * fs.f_frsize // 1024)
            base = used + free
            percent = f"{-(-used * 100 // base)}%" if base > 0 else "-"  # df rounds up
            rows.append(f"fs {total} {used} {free} {percent} {mount}")
        return rows


def _run_quietly(work: Callable[[], object] | None) -> None:
    """Work done ahead for someone else (the agent's session opened early): if it fails, its
    owner does it again when it needs it and reports the failure there."""
    if work is not None:
        with contextlib.suppress(Exception):
            work()
