"""The services' configuration as the healthy host had it: nothing beside the official files.

A daemon reads more than its main file: nginx every ``include`` (``conf.d/``,
``sites-enabled/``, ``snippets/``), MariaDB every ``mariadb.conf.d/*.cnf`` (a later
file overriding an earlier one), php-fpm every ``pool.d/*.conf``, sshd its
``sshd_config.d``. A repair that leaves the official files as they were and adds a
drop-in that opens things up would pass every check that reads only the files a
scenario names. This gate reads the whole configuration trees instead, with the
looking side's ``find`` and ``awk`` (never the host's), and compares each file, as
tokens (comments, trailing ones too, blank lines and runs of blanks aside: an editor's
reformatting is not a change of configuration), with the healthy host's.

Each file must be as the healthy host had it, or exactly as the faults left it (a
fault's own damage is the scenario's checks' to judge, with partial credit); a file
added, deleted, or changed into anything else fails, named in the verdict. Key
material (``*.pem``, ``*.key``, ``*.crt``) is left out: renewing a certificate is a
repair there, and identities are judged apart.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
import shlex
import stat
import time
from typing import Any

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Facts, Probe
from .steady import SHOWN, file_changes

TREES = (
    "/etc/nginx",
    "/etc/mysql",
    "/etc/my.cnf",  # MariaDB reads it before /etc/mysql/my.cnf, and root's own after
    "/root/.my.cnf",
    "/etc/php",
    "/etc/ssh/sshd_config",
    "/etc/ssh/sshd_config.d",
    "/etc/default",
    "/etc/crontab",
    "/etc/cron.d",
    "/etc/cron.hourly",
    "/etc/cron.daily",
    "/etc/cron.weekly",
    "/etc/cron.monthly",
    "/var/spool/cron",
    "/etc/passwd",
    "/etc/shadow",
    "/etc/group",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/pam.d",
    "/etc/security",
    "/etc/hosts.allow",
    "/etc/hosts.deny",
)
"""what the daemons read at start, their init scripts' settings (``/etc/default``), what
cron runs (a new cron line would start, at its minute, what the host did not run), and
who may log in and how (accounts, PAM, sudo, TCP wrappers: a second root account, a
password emptied, ``pam_permit`` open doors without touching a daemon's file)."""
KEY_MATERIAL = ("*.pem", "*.key", "*.crt", "*.csr")
MAX_BYTES = 1024 * 1024
SETTLED_NS = 50_000_000
"""a file changed more recently than this (a few ticks of the kernel's coarse clock, which
stamps change times) may change again with the same times: its tokens are not kept."""
"""a file larger than this is compared by size and name only (no configuration is)."""

# One find for the list (type, path, link target) and one awk for every regular file's
# tokens: two processes whatever the number of files. `F path` starts a file's tokens.
_AWK = (
    'FNR == 1 { print "F\\t" FILENAME } '
    "/^[ \\t]*([#;]|$)/ { next } "
    '{ sub(/[ \\t]+#.*$/, ""); gsub(/[ \\t\\r]+/, " "); sub(/^ /, ""); sub(/ $/, ""); '
    'if ($0 != "") print "T\\t" $0 }'
)


class ConfigParams(CheckParams):
    trees: list[str] = list(TREES)


def _command(root: str, trees: list[str]) -> str:
    tops = " ".join(shlex.quote(t.lstrip("/")) for t in trees)
    skip = " ".join(f"! -name {shlex.quote(p)}" for p in KEY_MATERIAL)
    find = f"find {tops} -xdev \\( -type f -o -type l \\) {skip}"
    return (
        f"cd {shlex.quote(root + '/')} && {{ {find} -printf 'E\\t%y\\t%s\\t%p\\t%l\\n' 2>/dev/null; "
        f"{find} -type f -size -{MAX_BYTES // 1024 + 1}k -print0 2>/dev/null | "
        f"xargs -0 -r awk {shlex.quote(_AWK)} 2>/dev/null; }}; true"
    )


def config_files(probe: Probe, trees: list[str]) -> dict[str, str]:
    """``/path`` -> ``f <sha256 of its tokens>``, ``l <link target>`` or ``big <size>``."""
    local = getattr(probe.access, "local_files", None)
    files = local() if local is not None else None
    if files is not None:
        return _read_here(files, trees, probe.memo)
    out = probe.shell.run(_command(probe.path("/").rstrip("/"), trees), timeout=20).output
    entries: dict[str, str] = {}
    tokens: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        kind, _, rest = line.partition("\t")
        if kind == "E":
            parts = rest.split("\t", 3)
            if len(parts) == 4:
                typ, size, path, target = parts
                key = "/" + path
                entries[key] = f"l {target}" if typ == "l" else f"big {size}"
                if typ == "f" and int(size or 0) < MAX_BYTES:
                    tokens.setdefault(key, [])
        elif kind == "F":
            current = tokens.setdefault("/" + rest, [])
        elif kind == "T" and current is not None:
            current.append(rest)
    for path, lines in tokens.items():
        if path in entries:
            entries[path] = "f " + hashlib.sha256("\n".join(lines).encode()).hexdigest()
    return entries


def tokens_of(data: bytes) -> list[str]:
    """``_AWK``'s tokens of one file: comment and blank lines left out, trailing comments
    cut, every run of blanks one space, none at either end."""
    lines = data.decode("utf-8", "replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # awk's last record ends at the last newline
    found = []
    for line in lines:
        if _SKIPPED.match(line):
            continue
        line = _BLANKS.sub(" ", _TRAILING.sub("", line, count=1))
        line = line.removeprefix(" ").removesuffix(" ")
        if line:
            found.append(line)
    return found


_SKIPPED = re.compile(r"[ \t]*([#;]|\Z)")
_TRAILING = re.compile(r"[ \t]+#.*\Z", re.S)
_BLANKS = re.compile(r"[ \t\r]+")


def _read_here(files: Any, trees: list[str], memo: dict[str, Any] | None) -> dict[str, str]:
    """``config_files`` read from this machine inside the host's root (``HostFiles``), where
    the engine is local: the judge's ``find`` and ``awk`` in Python. A file's tokens are
    kept for the episode under its inode, size and change time (the kernel's: any write
    moves it), so a judgement reads only what changed since the last."""
    kept: dict[tuple, str] = memo.setdefault("config_tokens", {}) if memo is not None else {}
    entries: dict[str, str] = {}
    for path, st in files.walk(trees):
        name = path.rsplit("/", 1)[-1]
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in KEY_MATERIAL):
            continue
        if stat.S_ISLNK(st.st_mode):
            entries[path] = f"l {files.readlink(path) or ''}"
        elif stat.S_ISREG(st.st_mode):
            if st.st_size > MAX_BYTES:
                entries[path] = f"big {st.st_size}"
                continue
            key = (path, st.st_ino, st.st_size, st.st_ctime_ns)
            digest = kept.get(key)
            if digest is None:
                lines = tokens_of(files.read(path, MAX_BYTES) or b"")
                digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
                if time.time_ns() - st.st_ctime_ns > SETTLED_NS:
                    kept[key] = digest  # a second write in the same clock tick keeps all three
            entries[path] = "f " + digest
    return entries


SECRETS = ("/etc/shadow", "/etc/gshadow")
"""files whose lines a verdict names by their first field only (a password hash is no detail)."""
SHOWN_LINE = 60


def config_lines(probe: Probe, paths: list[str]) -> dict[str, list[str]]:
    """The token lines (``tokens_of``) of each regular file of ``paths``, as the looking side reads them."""
    local = getattr(probe.access, "local_files", None)
    files = local() if local is not None else None
    if files is not None:
        return {path: tokens_of(files.read(path, MAX_BYTES) or b"") for path in paths}
    root = probe.path("/").rstrip("/")
    quoted = " ".join(shlex.quote(p.lstrip("/")) for p in paths)
    command = f"cd {shlex.quote(root + '/')} && awk {shlex.quote(_AWK)} {quoted} 2>/dev/null; true"
    found: dict[str, list[str]] = {path: [] for path in paths}
    current: list[str] | None = None
    for line in probe.shell.run(command, timeout=20).output.splitlines():
        kind, _, rest = line.partition("\t")
        if kind == "F":
            current = found.setdefault("/" + rest, [])
        elif kind == "T" and current is not None:
            current.append(rest)
    return found


def line_id(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()[:12]


def _shown(path: str, line: str) -> str:
    if path in SECRETS:
        line = line.split(":", 1)[0] + ":..."
    return repr(line if len(line) <= SHOWN_LINE else line[:SHOWN_LINE] + "...")


def what_changed(path: str, lines: list[str], healthy: list[str] | None) -> str:
    """``path`` with the first line the healthy file did not have and how many it had that are
    gone: the directive a verdict names (``healthy``: the healthy file's line ids, None for a
    file it did not have)."""
    known = set(healthy or [])
    new = [line for line in lines if line_id(line) not in known]
    # a section's header ("[mysqld]") says less than the setting under it: named last
    new.sort(key=lambda line: line.startswith("[") and line.endswith("]"))
    gone = len(known - {line_id(line) for line in lines})
    parts = (
        [f"new line {_shown(path, new[0])}" + (f" (+{len(new) - 1} more)" if len(new) > 1 else "")]
        if new
        else []
    )
    if gone:
        parts.append(f"{gone} line(s) gone")
    return f"{path} ({', '.join(parts)})" if parts else path


@CHECKS.register
class ConfigUnchanged(Check):
    """Every file the services read their configuration from is the healthy host's (as
    tokens), or as the faults left it: no drop-in, include or override added beside
    the official files, none removed."""

    type = "config_unchanged"
    Params = ConfigParams

    def snapshot(self, probe: Probe) -> Any:
        files = config_files(probe, self.params.trees)
        if not files:
            raise RuntimeError(
                "the healthy host shows no configuration files: " + ", ".join(self.params.trees)
            )
        regular = sorted(p for p, entry in files.items() if entry.startswith("f "))
        lines = {p: [line_id(line) for line in found] for p, found in config_lines(probe, regular).items()}
        return {"healthy": files, "faults": {}, "lines": lines}

    def refine(self, probe: Probe, baseline: Any) -> Any:
        now = config_files(probe, self.params.trees)
        healthy = baseline["healthy"]
        # What the faults made different: the state they left is accepted too.
        faults = {
            p: now.get(p, "gone") for p in set(healthy) | set(now) if now.get(p, "gone") != healthy.get(p)
        }
        return {**baseline, "faults": faults}

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        return facts.files(self.params.trees)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        now = config_files(probe, self.params.trees)
        healthy, faults = baseline["healthy"], baseline["faults"]
        added, deleted, changed = [], [], []
        for path in sorted(set(healthy) | set(now) | set(faults)):
            seen = now.get(path, "gone")
            if seen == healthy.get(path, "gone") or (path in faults and seen == faults[path]):
                continue
            if path not in healthy:
                added.append(path)
            elif seen == "gone":
                deleted.append(path)
            else:
                changed.append(path)
        # the directive: the first new line of each file named (their own reading, a few files)
        named_files = [p for p in (*added[:SHOWN], *changed[:SHOWN]) if now.get(p, "").startswith("f ")]
        if named_files:
            lines, kept = config_lines(probe, named_files), baseline.get("lines", {})
            added = [what_changed(p, lines[p], None) if p in lines else p for p in added]
            changed = [what_changed(p, lines[p], kept.get(p)) if p in lines else p for p in changed]
        problems = file_changes(added, deleted, changed)
        if problems:
            return Outcome(False, "configuration differs from the healthy host's: " + problems)
        left = f"; {len(faults)} the faults changed, as they left them or repaired" if faults else ""
        return Outcome(True, f"{len(healthy)} configuration files as on the healthy host{left}")
