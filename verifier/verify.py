"""Run a scenario's checks against live hosts and add them up into a Verdict.

``judge`` is the one entry point: it judges a set of hosts at one moment of an
episode (healthy, broken, or after the agent). Reward: 0 when any unscored
check (a gate) fails; otherwise the weighted share of scored checks that pass.
Every check runs, so the evidence is complete; once a gate has failed (the reward is 0.0
whatever the others find), a check still waiting on a page that does not answer, or on a
hold period, may stop waiting (``Probe.settled``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from ..core.errors import InvalidEpisode
from ..core.models import CheckResult, Outcome, Verdict
from ..core.registry import Registry
from .base import CHECKS, Check, Probe


@dataclass(frozen=True)
class CheckEntry:
    """What the verifier needs of a scenario's check entry."""

    name: str
    type: str
    host: str
    scored: bool
    weight: float
    params: Any


MAX_CHECKS_AT_ONCE = 8

Baseline = dict[str, Any]
"""check name -> what the check recorded on the healthy host."""

Moment = Literal["healthy", "broken", "after"]
"""when the hosts are judged: before any fault, once the faults are in, after the agent."""


@dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    baseline: Baseline
    """the evidence the verdict compared against: recorded (healthy), narrowed (broken), or as given."""


def judge(
    entries: Sequence[CheckEntry],
    probes: Mapping[str, Probe],
    baseline: Baseline | None = None,
    *,
    moment: Moment = "after",
    registry: Registry[Check] = CHECKS,
    workers: Executor | None = None,
    settles: bool = True,
) -> Judgement:
    """Judge the hosts behind ``probes`` (host name -> Probe) with the scenario's checks.

    ``healthy``: each check first records its evidence of the healthy hosts
    (``baseline`` is not needed); ``broken``: checks narrow ``baseline`` now that
    the faults are in; ``after``: the hosts as the agent left them, against
    ``baseline``. Whether a verdict is what its moment needs (every check passing
    when healthy, a scored one failing when broken) is the caller's to decide.
    InvalidEpisode when a check cannot record or narrow its evidence. ``workers``: the
    threads the checks look in (an episode's, kept between its judgements; else new ones).
    ``settles``: whether a failed gate may end the other checks' waits after the agent (not
    where every check's own outcome counts, whatever the gates: a report-only level's).
    """
    if moment == "healthy":
        baseline = snapshot(entries, probes, registry=registry)
    elif moment == "broken":
        baseline = refine(entries, probes, baseline or {}, registry=registry)
    elif moment != "after":
        raise ValueError(f"moment must be healthy, broken or after (got {moment!r})")
    baseline = baseline or {}
    # the broken proof wants every scored check's own outcome: no wait is cut short there
    settles = settles and moment == "after"
    verdict = verify(entries, probes, baseline, registry=registry, settles=settles, workers=workers)
    return Judgement(verdict, baseline)


def _build(entries: Sequence[CheckEntry], registry: Registry[Check]) -> list[tuple[CheckEntry, Check]]:
    return [(e, registry.get(e.type)(e.params)) for e in entries]


def _all_at_once(
    work: Sequence[tuple[Callable[[], Any], bool]], workers: Executor | None = None
) -> list[Future[Any]]:
    """Run every check's look, each in a thread (of ``workers``, else of a pool made for
    these looks), and wait for all.

    Checks mostly wait: on the engine (file archives), on HTTP from outside,
    on hold periods, and on the verifier's session, which runs one command at
    a time. Side by side those waits overlap, and a verdict takes about as long
    as the session's share of it rather than the sum of all. A look flagged
    ``alone`` (``Check.alone``) runs first, by itself: the others' probes keep
    the host's daemons busy, and a CPU sample would count that against them.
    """
    if workers is None:
        with ThreadPoolExecutor(max_workers=max(1, min(len(work), MAX_CHECKS_AT_ONCE))) as pool:
            return _all_at_once(work, pool)
    futures: dict[int, Future[Any]] = {}
    for i, (job, alone) in enumerate(work):
        if alone:
            futures[i] = workers.submit(job)
            wait([futures[i]])
    for i, (job, alone) in enumerate(work):
        if not alone:
            futures[i] = workers.submit(job)
    done = [futures[i] for i in range(len(work))]
    wait(done)
    return done


def _gather(
    entries: Sequence[CheckEntry],
    probes: Mapping[str, Probe],
    registry: Registry[Check],
    look: Callable[[Check, Probe, str], Any],
    moment: str,
) -> Baseline:
    built = _build(entries, registry)
    futures = _all_at_once(
        [(partial(look, check, probes[entry.host], entry.name), check.alone) for entry, check in built]
    )
    gathered = {}
    for (entry, _), future in zip(built, futures, strict=True):
        exc = future.exception()
        if exc is not None:
            raise InvalidEpisode(
                f"check {entry.name!r} could not look at the {moment} host: {type(exc).__name__}: {exc}"
            ) from exc
        gathered[entry.name] = future.result()
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


KEPT = "kept outcomes"
"""where a host's memo keeps, per check, the facts and outcome of its last look."""


def _kept(check: Check, probe: Probe, baseline: Any, name: str) -> tuple[Outcome | None, bytes | None]:
    """The outcome kept from the episode's previous judgement of the host, where the check's
    facts (``Check.facts``) and its baseline are the same as then (a running score only:
    ``Probe.facts`` is None elsewhere), and the facts' key to keep the next one under."""
    try:
        facts = probe.facts()
        key = None if facts is None or probe.memo is None else check.facts(facts, baseline)
    except Exception:  # facts that cannot be read keep nothing; the check still looks
        return None, None
    if key is not None:
        kept = probe.memo.setdefault(KEPT, {}).get(name)  # type: ignore[union-attr]
        if kept is not None and kept[0] is baseline and kept[1] == key:
            return kept[2], key
    return None, key


def _look(check: Check, probe: Probe, baseline: Any, name: str, key: bytes | None) -> Outcome:
    """The check's outcome, looked at now; kept under ``key`` for the next judgement."""
    try:
        outcome = check.evaluate(probe, baseline)
    except Exception as exc:  # a broken check fails alone; the others still count
        return Outcome(False, f"check raised {type(exc).__name__}: {exc}")
    if key is not None:
        probe.memo[KEPT][name] = (baseline, key, outcome)  # type: ignore[index]
    return outcome


def verify(
    entries: Sequence[CheckEntry],
    probes: Mapping[str, Probe],
    baseline: Baseline,
    *,
    registry: Registry[Check] = CHECKS,
    settles: bool = True,
    workers: Executor | None = None,
) -> Verdict:
    """The verdict of ``entries`` against ``baseline``; ``settles``: a failed gate may end the
    other checks' waits (``Probe.settled``); ``workers``: as ``judge``'s."""
    built = _build(entries, registry)
    # Every kept outcome first, before any check looks: the facts are read once, before any
    # command of this judgement runs in the host (its processes would be in them), and a
    # kept check then takes no thread and no turn; only the checks that must look are run,
    # side by side (a quiet step's running score: a handful of the host's many checks).
    kept = [_kept(check, probes[entry.host], baseline.get(entry.name), entry.name) for entry, check in built]
    looking = [i for i, (outcome, _) in enumerate(kept) if outcome is None]
    settled = threading.Event()  # a gate failed: 0.0 whatever the checks still waiting find
    for probe in probes.values():
        probe.settled = settled
    if settles and any(
        not entry.scored and outcome is not None and not outcome.passed
        for (entry, _), (outcome, _) in zip(built, kept, strict=True)
    ):
        settled.set()

    def look(i: int) -> Outcome:
        entry, check = built[i]
        outcome = _look(check, probes[entry.host], baseline.get(entry.name), entry.name, kept[i][1])
        if settles and not entry.scored and not outcome.passed:
            settled.set()
        return outcome

    futures = _all_at_once([(partial(look, i), built[i][1].alone) for i in looking], workers)
    outcomes: dict[int, Outcome] = {i: future.result() for i, future in zip(looking, futures, strict=True)}
    results = []
    for i, (entry, _) in enumerate(built):
        outcome = outcomes[i] if i in outcomes else kept[i][0]
        assert outcome is not None
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
