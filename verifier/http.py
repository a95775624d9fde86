"""Checks made from outside the container, through the port's endpoint (published, or relayed)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from pydantic import Field

from fixos.core.models import Outcome
from fixos.verifier.base import CHECKS, Check, CheckParams, Probe


@CHECKS.register
class HttpPage(Check):
    """The page answers with the expected status and the site's real content.

    ``same_as_healthy`` compares the body with the one the healthy host served
    before any fault, so a stub page or a changed site does not pass.
    """

    type = "http_page"

    class Params(CheckParams):
        path: str = "/"
        port: int = 80
        status: int = 200
        same_as_healthy: bool = True
        contains: str | None = None
        hold_seconds: float = Field(default=0, ge=0, le=60)
        """ask again after this long: the page must stay up, not just be up."""

    def snapshot(self, probe: Probe) -> Any:
        resp = probe.access.http_get(self.params.port, self.params.path)
        return hashlib.sha256(resp.body).hexdigest() if resp.status == self.params.status else None

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        outcome = self._once(probe, baseline)
        if not outcome.passed or not self.params.hold_seconds or not probe.patient:
            return outcome
        time.sleep(self.params.hold_seconds)
        later = self._once(probe, baseline)
        if not later.passed:
            return Outcome(False, f"up, then {self.params.hold_seconds:g}s later: {later.detail}")
        return Outcome(True, f"{outcome.detail}; still so {self.params.hold_seconds:g}s later")

    def _once(self, probe: Probe, baseline: Any) -> Outcome:
        p = self.params
        resp = probe.access.http_get(p.port, p.path)
        if resp.status == 0:
            return Outcome(False, f"GET {p.path} on port {p.port}: no answer ({resp.error})")
        seen = f"GET {p.path} -> {resp.status}, {len(resp.body)} bytes"
        if resp.status != p.status:
            return Outcome(False, f"{seen}; expected status {p.status}")
        if p.contains is not None and p.contains.encode() not in resp.body:
            return Outcome(False, f"{seen}; does not contain {p.contains!r}")
        if p.same_as_healthy and hashlib.sha256(resp.body).hexdigest() != baseline:
            return Outcome(False, f"{seen}; not the page the healthy site served")
        return Outcome(True, f"{seen}; the site's real page")
