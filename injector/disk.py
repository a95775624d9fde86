"""A filesystem filled up by files that look like what really fills disks."""

from __future__ import annotations

import random
import shlex
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from ..core.errors import InvalidEpisode
from ..core.models import Outcome
from ..core.words import word
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams
from .edit import install_script
from .process import Culprit, culprit_path

# Where junk really piles up on a box like this, and what it looks like inside.
JUNK = [
    (
        "/var/log/nginx/shop.access.log.1",
        '127.0.0.1 - - [28/Nov/2026:03:14:07 +0000] "GET /status HTTP/1.1" 200 1804 "-" "uptime-probe/2.1"',
    ),
    (
        "/var/log/shop/debug.log",
        "2026-11-28T03:14:07Z DEBUG status: rendered 10 orders in 3ms (cache=miss)",
    ),
    (
        "/var/log/mysql/mariadb-slow.log",
        "# Query_time: 2.113  Lock_time: 0.000 Rows_sent: 10  Rows_examined: 10\nSELECT * FROM orders;",
    ),
    (
        "/var/log/php8.2-fpm.log.1",
        '[28-Nov-2026 03:14:07] WARNING: [pool www] child 4242 said into stderr: "cache miss"',
    ),
    (
        "/var/log/backup/nightly-dump.sql.partial",
        "INSERT INTO `orders` VALUES (1001,'Harbor Cafe','Mooring line 12mm',4,'shipped');",
    ),
]

_GRAIN = 128 * 1024


def _df(shell: Shell, path: str) -> tuple[int, int, int]:
    out = shell.run(f"df -B1 --output=size,used,avail {shlex.quote(path)} | tail -n 1", timeout=10)
    size, used, avail = (int(x) for x in out.output.split())
    return size, used, avail


def _junk_bytes(shell: Shell, path: str, percent: int) -> int:
    """How many bytes of junk fill the filesystem holding ``path`` to ``percent`` as ``df`` shows it."""
    size, used, _ = _df(shell, path)
    # df rounds Use% up, so aim half a percent under the target. Rounding
    # what is already used (a little different at each boot) keeps the
    # junk's sizes identical for the same seed.
    target = size * (percent - 0.5) / 100
    used_rounded = -(-used // _GRAIN) * _GRAIN
    return max(0, int(target - used_rounded)) // 4096 * 4096


def _percent(shell: Shell, path: str) -> int:
    out = shell.run(f"df --output=pcent {shlex.quote(path)} | tail -n 1", timeout=10).output
    return int(out.strip().rstrip("%"))


@FAULTS.register
class DiskFill(Fault):
    """The filesystem holding ``path`` is filled to exactly ``percent`` as ``df`` shows it.

    The junk is split over 1-3 plausible files (which ones, and the split, come
    from the seed). ``path`` must be a bounded filesystem of the host's own
    (``/var/log`` is one), never the machine's disk.
    """

    type = "disk_fill"
    records = ("files", "junk")

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The junk files removed."""
        return f"printf '%s\\n' {word(seeded['junk'])} | xargs -r rm -f --"

    class Params(FaultParams):
        path: str = "/var/log"
        percent: int = Field(ge=50, le=100)

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.files: list[str] = []
        """the junk files inject wrote"""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        mount = shell.run(f"findmnt -no FSTYPE --target {shlex.quote(self.params.path)}").output
        if mount.strip() not in ("tmpfs", "ext4", "xfs"):
            raise InvalidEpisode(f"{self.params.path} is not a bounded filesystem of the host")
        picks = rng.sample(JUNK, rng.randint(1, 3))
        weights = [rng.randint(1, 5) for _ in picks]
        need = _junk_bytes(shell, self.params.path, self.params.percent)
        files = []
        for (path, line), weight in zip(picks, weights, strict=True):
            nbytes = need * weight // sum(weights)
            files.append({"path": path, "bytes": nbytes})
            quoted = shlex.quote(path)
            shell.run(
                f"mkdir -p $(dirname {quoted}) && yes {shlex.quote(line)} | head -c {nbytes} > {quoted}",
                timeout=60,
            )
        self.files = [f["path"] for f in files]
        return {"files": files, "junk": "\n".join(self.files)}

    def confirm(self, shell: Shell) -> Outcome:
        # At least the target, with this fault's own junk there: another fault's
        # log lines may add a little on top, and this fault is in place all the same.
        pct = _percent(shell, self.params.path)
        present = (
            shell.run("ls -d -- " + " ".join(shlex.quote(p) for p in self.files)).ok if self.files else False
        )
        detail = f"df shows {self.params.path} at {pct}%; junk files present: {present}"
        return Outcome(pct >= self.params.percent and present, detail)

    def revert(self, shell: Shell) -> None:
        if self.files:
            shell.run("rm -f " + " ".join(shlex.quote(p) for p in self.files))


_HOLDER = """#!/usr/bin/perl
# Forwards shop audit events to the (long gone) central collector.
open(my $log, '>>', '{log}') or die "open: $!";
$| = 1;
sleep 3600 while 1;
"""
HOLDERS = [
    ("audit-forwarder", "/var/log/shop/audit.log"),
    ("event-relay", "/var/log/shop/events.log"),
    ("metrics-agent", "/var/log/metrics/agent.log"),
    ("sync-daemon", "/var/log/sync/transfer.log"),
]


@FAULTS.register
class DeletedOpenFile(Culprit, Fault):
    """A daemon still holds a log file someone deleted: ``df`` shows the filesystem
    ``percent`` full while ``du`` finds nothing. Space returns only when the
    holder closes it (restart or kill it, or truncate through /proc)."""

    type = "deleted_open_file"
    records = ("name", "pid", "path", "file", "bytes")
    # The same filesystem and fill target as disk_fill's; the holder (``Culprit``) is
    # the culprit, its name, path and PID kept and its reference repair a kill.
    Params = DiskFill.Params

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.log = ""
        """the log the holder keeps open and its junk line, drawn from the seed"""
        self.line = ""

    def prepare(self, shell: Shell, rng: random.Random) -> None:
        self.name, self.log = rng.choice(HOLDERS)
        shell.run(f"mkdir -p $(dirname {self.log})")
        self.path = culprit_path(rng, self.name)
        install_script(shell, self.path, _HOLDER.format(log=self.log))
        self.line = rng.choice(JUNK)[1]

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        self.pid = int(
            shell.run(f"setsid {self.path} </dev/null >/dev/null 2>&1 & echo $!").output.split()[-1]
        )
        shell.run(f"for i in $(seq 1 50); do [ -e {self.log} ] && break; sleep 0.05; done")
        need = _junk_bytes(shell, self.params.path, self.params.percent)
        quoted = shlex.quote(self.log)
        # `;`, not `&&`: under a session's pipefail `yes` ends by SIGPIPE (141) and the file
        # stayed; a short write shows in confirm's df figure anyway.
        shell.run(f"yes {shlex.quote(self.line)} | head -c {need} >> {quoted}; rm -f {quoted}", timeout=60)
        return {"name": self.name, "pid": self.pid, "path": self.path, "file": self.log, "bytes": need}

    def confirm(self, shell: Shell) -> Outcome:
        pct = _percent(shell, self.params.path)
        held = shell.run(f"ls -l /proc/{self.pid}/fd 2>/dev/null | grep -F '{self.log} (deleted)'").ok
        ok = pct >= self.params.percent and held
        return Outcome(
            ok,
            f"df shows {self.params.path} at {pct}%; {self.name} (PID {self.pid}) holds deleted {self.log}",
        )

    def revert(self, shell: Shell) -> None:
        if self.pid is not None:
            shell.run(f"kill {self.pid}")


_SESSION_DIRS = ["/var/log/shop/requests", "/var/log/shop/trace", "/var/log/php-debug"]


@FAULTS.register
class InodesExhausted(Fault):
    """Thousands of tiny files use up the filesystem's inodes: "No space left on
    device" while ``df -h`` shows plenty of room (``df -i`` tells the truth)."""

    type = "inodes_exhausted"
    records = ("directory", "prefix")

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The directory of tiny files removed."""
        return f"rm -rf {word(seeded['directory'])}"

    class Params(FaultParams):
        path: str = "/var/log"

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.directory = ""
        """where inject made its files, drawn from the seed"""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        directory = rng.choice(_SESSION_DIRS)
        prefix = rng.choice(["req", "trace", "dump", "sess"])
        free = int(shell.run(f"df --output=iavail {self.params.path} | tail -n 1").output)
        # bash builtins only: thousands of forks would take seconds.
        shell.run(
            f"mkdir -p {directory} && cd {directory} && "
            f"for ((i = 0; i < {free + 16}; i++)); do : > {prefix}-$i.json 2>/dev/null || break; done; cd /",
            timeout=120,
        )
        self.directory = directory
        return {"directory": directory, "prefix": prefix}

    def confirm(self, shell: Shell) -> Outcome:
        out = shell.run(f"df --output=ipcent {self.params.path} | tail -n 1").output.strip()
        probe = shell.run(f": > {self.params.path}/.fixos-probe 2>&1; rm -f {self.params.path}/.fixos-probe")
        ok = out == "100%" and "No space left" in probe.output
        return Outcome(
            ok, f"df -i shows {self.params.path} at {out}; creating a file: {probe.output.strip()[:80]}"
        )

    def revert(self, shell: Shell) -> None:
        if self.directory:
            shell.run(f"rm -rf {self.directory}", timeout=60)
