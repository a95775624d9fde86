"""The steady-state gate on ownership and modes: under /etc, the web roots,
MariaDB's data directory and the logs, every path keeps the owner, group and
mode it had on the healthy host, and nothing has newly become world-writable
(MariaDB skips a world-writable config, so `chmod -R 777` hides a broken one).

The listing is bounded (``limit`` entries, the first ones ``find`` meets) and
compared inside the host against the healthy listing sent with the command:
a filled /var/log holds thousands of files, more than a session returns.
"""

from __future__ import annotations

import base64
import gzip
import os
import shlex
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Facts, Probe
from .steady import named

_FORMAT = r"%U:%G:%m:%y\t%p\n"
"""numeric owner and group (names can be edited in /etc/passwd), octal mode, file type."""

_DIFFER = 5000
"""at most this many differences come back (a `chown -R` over the data directory is ~200)."""

# Baseline on fd 3 (``perm TAB path``), the listing on stdin. ``C`` a path whose
# owner, group or mode changed; ``W`` a new path writable by everyone (links
# excepted: their mode means nothing); ``N`` how many paths were listed.
_COMPARE = r"""awk -F '\t' -v cap=%d '
function show(kind) { if (shown++ < cap) print kind "\t" $1 "\t" $2 }
NR == FNR { healthy[$2] = $1; next }
{ listed++ }
$2 in healthy { if (healthy[$2] != $1) show("C"); next }
{ split($1, f, ":"); m = f[3] }
f[4] != "l" && substr(m, length(m)) ~ /[2367]/ { show("W") }
END { print "N\t" listed + 0 "\t" shown + 0 }' /dev/fd/3 -"""


@dataclass
class Differences:
    """What the host shows against the healthy listing."""

    changed: dict[str, str] = field(default_factory=dict)
    """path -> its owner, group, mode and type now, where they are not the healthy ones."""
    world_writable: list[str] = field(default_factory=list)
    """paths the healthy listing lacks that everyone may write."""
    listed: int = 0


class ModesParams(CheckParams):
    trees: list[str] = Field(default=["/etc", "/var/www", "/var/lib/mysql", "/var/log"], min_length=1)
    limit: int = Field(default=20000, ge=100, le=200_000)
    """most paths listed; beyond it the verdict says the listing was cut."""
    root: str = ""
    """where the host's filesystem is seen from (empty: the host's own shell)."""


def _packed(command: str) -> str:
    """The command's output gzipped and in base64: one line however long the listing
    (the newline lets ``command`` end in a here-document)."""
    return f"{{ {command}\n}} | gzip -1 | base64 -w0"


def _unpacked(text: str, what: str) -> list[str]:
    try:
        return gzip.decompress(base64.b64decode(text.strip())).decode("utf-8", "replace").splitlines()
    except (ValueError, OSError, EOFError) as exc:
        raise RuntimeError(f"cannot {what}: {type(exc).__name__}: {text.strip()[-200:]}") from None


@CHECKS.register
class ModesUnchanged(Check):
    """Owners and modes are the healthy host's; where the faults changed them, the
    scenario's checks judge the repair, and here only that nothing else became
    world-writable."""

    type = "modes_unchanged"
    Params = ModesParams

    def _root(self, probe: Probe) -> str:
        """where the host's filesystem is: the probe's vantage point (an inspector's
        ``/proc/1/root``) before the params' own."""
        return probe.root + self.params.root

    def _find(self, root: str) -> str:
        trees = " ".join(shlex.quote(root + t) for t in self.params.trees)
        return f"find {trees} -printf '{_FORMAT}' 2>/dev/null | head -n {self.params.limit}"

    @staticmethod
    def _strip(root: str, path: str) -> str:
        return path[len(root) :] if root and path.startswith(root) else path

    def snapshot(self, probe: Probe) -> Any:
        root = self._root(probe)
        out = probe.shell.run(_packed(self._find(root)), timeout=30)
        listing = {}
        for line in _unpacked(out.output, "list owners and modes"):
            perm, _, path = line.partition("\t")
            listing[self._strip(root, path)] = perm
        return {"paths": listing, "disturbed": [], "world_writable": []}

    def _compare(self, probe: Probe, healthy: dict[str, str]) -> Differences:
        local = self._read_outside(probe)
        if local is not None:
            return _differences(healthy, local)
        root = self._root(probe)
        lines = "".join(f"{perm}\t{root}{path}\n" for path, perm in healthy.items())
        command = (
            f"{self._find(root)} | {_COMPARE % _DIFFER} 3<<'__FIXOS_HEALTHY__'\n{lines}__FIXOS_HEALTHY__"
        )
        out = probe.shell.run(_packed(command), timeout=30)
        found = Differences()
        for line in _unpacked(out.output, "compare owners and modes"):
            kind, perm, path = [*line.split("\t"), "", ""][:3]
            if kind == "N":
                found.listed = int(perm)
            elif kind == "C":
                found.changed[self._strip(root, path)] = perm
            elif kind == "W":
                found.world_writable.append(self._strip(root, path))
        return found

    def _read_outside(self, probe: Probe) -> dict[str, str] | None:
        """What the host changed in the trees against its image, read from this machine
        (``Facts.modes``: no find, awk and gzip in the judge, ~50 CPU-ms a judgement); None
        where the facts cannot say (an exported task, a remote engine, an unread mount)."""
        if self.params.root or probe.known_facts is None:
            return None
        return probe.known_facts.modes(self.params.trees)

    def _judged(self, baseline: Any) -> dict[str, str]:
        """The healthy listing minus what the faults disturbed."""
        disturbed = set(baseline["disturbed"])
        return {p: perm for p, perm in baseline["paths"].items() if p not in disturbed}

    def refine(self, probe: Probe, baseline: Any) -> Any:
        found = self._compare(probe, self._judged(baseline))
        return {
            "paths": baseline["paths"],
            "disturbed": sorted({*baseline["disturbed"], *found.changed}),
            "world_writable": sorted({*baseline["world_writable"], *found.world_writable}),
        }

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        return None if self.params.root else facts.files(self.params.trees, contents=False)

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        found = self._compare(probe, self._judged(baseline))
        healthy = baseline["paths"]
        allowed = set(baseline["world_writable"])
        newly = [p for p in found.world_writable if p not in allowed]
        changed = [
            f"{p} ({healthy.get(p)} -> {now})"
            for p, now in found.changed.items()
            if not _handed_to_tree_owner(healthy, p, now)
        ]
        problems = []
        if changed:
            problems.append("owner/mode changed (uid:gid:mode:type): " + named(changed))
        if newly:
            problems.append("newly world-writable: " + named(newly))
        cut = f"; listing cut at {self.params.limit} paths" if found.listed >= self.params.limit else ""
        if problems:
            return Outcome(False, "; ".join(problems) + cut)
        left = (
            f"; {len(baseline['disturbed'])} the faults changed left to the scenario"
            if baseline["disturbed"]
            else ""
        )
        return Outcome(True, f"{found.listed} paths with the healthy host's owners and modes{left}{cut}")


def _differences(healthy: dict[str, str], changed_here: dict[str, str]) -> Differences:
    """``_COMPARE``'s verdict where only the paths the host holds otherwise than its image
    are listed: every other path has the image's owner and mode, as the healthy host had."""
    found = Differences(listed=len(healthy.keys() | changed_here.keys()))
    for path, perm in sorted(changed_here.items()):
        if len(found.changed) + len(found.world_writable) >= _DIFFER:
            break
        if path in healthy:
            if healthy[path] != perm:
                found.changed[path] = perm
            continue
        _uid, _gid, mode, kind = perm.split(":")
        if kind != "l" and mode[-1] in "2367":
            found.world_writable.append(path)
    return found


def _handed_to_tree_owner(healthy: dict[str, str], path: str, now: str) -> bool:
    """Only the owner and group changed, to those its directory has on the healthy
    host: `chown -R mysql:mysql /var/lib/mysql`, the usual repair of a data
    directory, also hands over the few files the package left to root."""
    before, parent = healthy.get(path), healthy.get(os.path.dirname(path))
    if before is None or parent is None:
        return False
    uid_gid, mode_type = now.split(":")[:2], now.split(":")[2:]
    return mode_type == before.split(":")[2:] and uid_gid == parent.split(":")[:2]
