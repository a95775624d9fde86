"""Checks on files, read through the engine rather than any program inside the host."""

from __future__ import annotations

import hashlib
from typing import Any

from fixos.models import Outcome
from verifier.base import Check, CheckParams, Probe


def _digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


class FileUnchanged(Check):
    """Each file is byte-for-byte what the healthy host had (a gate against stub configs)."""

    type = "file_unchanged"

    class Params(CheckParams):
        paths: list[str]

    def snapshot(self, probe: Probe) -> Any:
        return {path: _digest(probe.access.read_file(path)) for path in self.params.paths}

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        changed = [
            path
            for path in self.params.paths
            if _digest(probe.access.read_file(path)) != baseline.get(path)
        ]
        if changed:
            return Outcome(False, "changed since the healthy host: " + ", ".join(changed))
        return Outcome(True, f"{len(self.params.paths)} file(s) as on the healthy host")
