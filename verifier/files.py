"""Checks on files, read through the engine rather than any program inside the host."""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Probe

_TOKEN = re.compile(rb"[{};]|[^\s{};]+")
# `#` comments anywhere (nginx, my.cnf); `;` comments only as a whole line (ini),
# since in nginx `;` ends a directive.
_COMMENT = re.compile(rb"#.*$|^\s*;.*$", re.MULTILINE)


def _tokens(data: bytes) -> bytes:
    """The file as a config parser sees it: no comments, no layout."""
    return b" ".join(_TOKEN.findall(_COMMENT.sub(b"", data)))


def _digest(data: bytes | None, compare: str = "bytes") -> str | None:
    if data is None:
        return None
    return hashlib.sha256(_tokens(data) if compare == "tokens" else data).hexdigest()


@CHECKS.register
class FileUnchanged(Check):
    """Each file is what the healthy host had, or still what the faults left
    (untouched): a gate against replacing a config with a stub.

    ``compare: tokens`` ignores comments and layout, so a config repaired by
    hand passes while one replaced by something else does not.
    """

    type = "file_unchanged"

    class Params(CheckParams):
        paths: list[str]
        compare: Literal["bytes", "tokens"] = "bytes"

    def _digests(self, probe: Probe) -> dict[str, str | None]:
        read_files = getattr(probe.access, "read_files", None)
        if read_files is not None:
            contents = read_files(list(self.params.paths))
        else:  # an access that reads one file at a time
            contents = {path: probe.access.read_file(path) for path in self.params.paths}
        return {path: _digest(contents.get(path), self.params.compare) for path in self.params.paths}

    def snapshot(self, probe: Probe) -> Any:
        return {path: [digest] for path, digest in self._digests(probe).items()}

    def refine(self, probe: Probe, baseline: Any) -> Any:
        now = self._digests(probe)
        return {path: [*ok, now.get(path)] for path, ok in baseline.items()}

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        now = self._digests(probe)
        changed = [p for p in self.params.paths if now[p] not in baseline.get(p, [])]
        if changed:
            return Outcome(False, "changed since the healthy host: " + ", ".join(changed))
        return Outcome(True, f"{len(self.params.paths)} file(s) as on the healthy host")
