"""Checks asked of MariaDB itself."""

from __future__ import annotations

from typing import Any

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Probe


@CHECKS.register
class SqlValue(Check):
    """A query's single value is at most ``max`` (numbers) or equals ``equals``."""

    type = "sql_value"

    class Params(CheckParams):
        query: str
        max: float | None = None
        equals: str | None = None

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        out = probe.sql(self.params.query, timeout=15, connect_timeout=None)
        if out.exit_code != 0:
            return Outcome(False, f"query failed: {out.output.strip()[:200]}")
        value = out.output.strip().split("\t")[-1] if out.output.strip() else ""
        seen = f"{self.params.query} -> {value!r}"
        if self.params.equals is not None and value != self.params.equals:
            return Outcome(False, f"{seen}; expected {self.params.equals!r}")
        if self.params.max is not None:
            try:
                number = float(value)
            except ValueError:
                return Outcome(False, f"{seen}; not a number")
            if number > self.params.max:
                return Outcome(False, f"{seen}; above {self.params.max:g}")
        return Outcome(True, seen)
