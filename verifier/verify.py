"""Run a scenario's checks against live hosts and add them up into a Verdict.

Reward: 0 when any unscored check (a gate) fails; otherwise the weighted share
of scored checks that pass. Every check runs, so the evidence is complete.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fixos.errors import InvalidEpisode
from fixos.models import CheckResult, Outcome, Verdict
from fixos.registry import Registry
from verifier.base import CHECKS, Check, Probe


@dataclass(frozen=True)
class CheckEntry:
    """What the verifier needs of a scenario's check entry."""

    name: str
    type: str
    host: str
    scored: bool
    weight: float
    params: Any


Baseline = dict[str, Any]
"""check name -> what the check recorded on the healthy host."""


def _build(entries: Sequence[CheckEntry], registry: Registry[Check]) -> list[tuple[CheckEntry, Check]]:
    return [(e, registry.get(e.type)(e.params)) for e in entries]


def _gather(
    entries: Sequence[CheckEntry],
    probes: Mapping[str, Probe],
    registry: Registry[Check],
    look: Callable[[Check, Probe, str], Any],
    moment: str,
) -> Baseline:
    gathered = {}
    for entry, check in _build(entries, registry):
        try:
            gathered[entry.name] = look(check, probes[entry.host], entry.name)
        except Exception as exc:
            raise InvalidEpisode(
                f"check {entry.name!r} could not look at the {moment} host: {type(exc).__name__}: {exc}"
            ) from exc
    return gathered


def snapshot(
    entries: Sequence[CheckEntry], probes: Mapping[str, Probe], *, registry: Registry[Check] = CHECKS
) -> Baseline:
    """What each check records of the healthy host; InvalidEpisode if one cannot."""
    return _gather(entries, probes, registry, lambda check, probe, _: check.snapshot(probe), "healthy")


def refine(
    entries: Sequence[CheckEntry],
    probes: Mapping[str, Probe],
    baseline: Baseline,
    *,
    registry: Registry[Check] = CHECKS,
) -> Baseline:
    """Let checks narrow their evidence now that the faults are in."""
    return _gather(
        entries,
        probes,
        registry,
        lambda check, probe, name: check.refine(probe, baseline.get(name)),
        "broken",
    )


def _evaluate(check: Check, probe: Probe, baseline: Any) -> Outcome:
    try:
        return check.evaluate(probe, baseline)
    except Exception as exc:  # a broken check fails alone; the others still count
        return Outcome(False, f"check raised {type(exc).__name__}: {exc}")


def verify(
    entries: Sequence[CheckEntry],
    probes: Mapping[str, Probe],
    baseline: Baseline,
    *,
    registry: Registry[Check] = CHECKS,
) -> Verdict:
    results = []
    for entry, check in _build(entries, registry):
        outcome = _evaluate(check, probes[entry.host], baseline.get(entry.name))
        results.append(
            CheckResult(
                name=entry.name,
                type=entry.type,
                passed=outcome.passed,
                scored=entry.scored,
                weight=entry.weight,
                detail=outcome.detail,
            )
        )
    return Verdict(reward=reward_of(results), checks=results)


def reward_of(results: Sequence[CheckResult]) -> float:
    if any(not r.scored and not r.passed for r in results):
        return 0.0
    total = sum(r.weight for r in results if r.scored)
    if total == 0:
        return 0.0
    return round(sum(r.weight for r in results if r.scored and r.passed) / total, 4)
