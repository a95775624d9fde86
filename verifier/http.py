"""Checks made from outside the container, through the port's endpoint (published, or relayed)."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from typing import Any

from pydantic import Field

from ..core.models import HttpResponse, Outcome
from .base import CHECKS, Check, CheckParams, Probe
from .held import NetworkWatch

FIRST_WAIT = 5.0
SECOND_WAIT = 10.0
"""seconds a page may take: a final verdict asks once more, for longer, when the first
ask timed out. Two cores booting other episodes' hosts can hold a PHP page that reads
MariaDB past 5 s; a page that was refused, reset or answered an error is not asked again
(a restart loop gains nothing), nor one the network holds (``fixos.verifier.held``: failed
within ~0.6 s), and one that hangs otherwise still fails after 15 s in all."""


SETTLED = "not waited for: a gate failed, the verdict is 0.0 whatever this page does"


def _ask(probe: Probe, port: int, path: str, timeout: float) -> HttpResponse:
    """One ask, given up when the judgement is settled at 0.0 before the page answers (a
    do-nothing agent on a throttled link waited 15 s for a page that could change nothing:
    net_5), or when the network holds its request (``fixos.verifier.held``). The ask's own
    thread ends by its time-out."""
    if probe.settled.is_set():
        return HttpResponse(0, b"", SETTLED)
    watch = NetworkWatch(probe.world)  # looks only once the page is slow
    answers: list[HttpResponse | BaseException] = []
    answered = threading.Event()

    def ask() -> None:
        try:
            answers.append(probe.access.http_get(port, path, timeout))
        except BaseException as exc:  # raised where the check runs: it fails alone
            answers.append(exc)
        finally:
            answered.set()

    threading.Thread(target=ask, name="fixos-page", daemon=True).start()
    while not answered.wait(0.05):
        if probe.settled.is_set():
            return HttpResponse(0, b"", SETTLED)
        held = watch.held() if watch.due() else None
        if held is not None:  # not timed out: no second ask (waiting cannot bring a lost packet)
            return HttpResponse(0, b"", held)
    if isinstance(answers[0], BaseException):
        raise answers[0]
    return answers[0]


def get_page(probe: Probe, port: int, path: str) -> HttpResponse:
    """The page as served from outside, patient with a slow answer when ``probe`` is."""
    resp = _ask(probe, port, path, FIRST_WAIT)
    if resp.status == 0 and resp.timed_out and probe.patient:
        again = _ask(probe, port, path, SECOND_WAIT)
        if again.status == 0:
            then = f"then in {SECOND_WAIT:g} s" if again.error != SETTLED else "then"
            why = f"{resp.error}, {then}: {again.error}"
            return HttpResponse(0, b"", why, again.timed_out)
        return dataclasses.replace(again, error=f"answered when asked again: {resp.error}")
    return resp


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
        """ask again after this long: the page must stay up, not just be up (in the final
        verdict's last judgement, after the restarts: ``fixos.episodes.durability``)."""

    def snapshot(self, probe: Probe) -> Any:
        resp = get_page(probe, self.params.port, self.params.path)
        return hashlib.sha256(resp.body).hexdigest() if resp.status == self.params.status else None

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        outcome = self._once(probe, baseline)
        if not outcome.passed or not self.params.hold_seconds or not (probe.patient and probe.holding):
            return outcome
        if probe.settled.wait(self.params.hold_seconds):
            return Outcome(
                outcome.passed, f"{outcome.detail}; not held: {SETTLED.removeprefix('not waited for: ')}"
            )
        later = self._once(probe, baseline)
        if not later.passed:
            return Outcome(False, f"up, then {self.params.hold_seconds:g}s later: {later.detail}")
        return Outcome(True, f"{outcome.detail}; still so {self.params.hold_seconds:g}s later")

    def _once(self, probe: Probe, baseline: Any) -> Outcome:
        p = self.params
        resp = get_page(probe, p.port, p.path)
        if resp.status == 0:
            return Outcome(False, f"GET {p.path} on port {p.port}: no answer ({resp.error})")
        seen = f"GET {p.path} -> {resp.status}, {len(resp.body)} bytes"
        if resp.error:  # answered only when asked again: the record says the site was slow
            seen += f" ({resp.error})"
        if resp.status != p.status:
            return Outcome(False, f"{seen}; expected status {p.status}")
        if p.contains is not None and p.contains.encode() not in resp.body:
            return Outcome(False, f"{seen}; does not contain {p.contains!r}")
        if p.same_as_healthy and hashlib.sha256(resp.body).hexdigest() != baseline:
            return Outcome(False, f"{seen}; not the page the healthy site served")
        return Outcome(True, f"{seen}; the site's real page")
