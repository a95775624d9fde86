"""Grading a report against the truth, deterministically (docs/diagnosis.md has the numbers).

Each finding may earn credit for one fault, each fault from one finding: the pairing
that earns the most in all (a maximum matching on credit). A pair's credit, out of 1:
``WEIGHTS["where"]`` when the finding names the fault's host and one of its components,
then ``WEIGHTS["cause"]`` for its cause class and ``WEIGHTS["identity"]`` for naming its
seeded parts (a PID, a file; a fault without any gives that share to ``where``). The
diagnosis is the F-score of the credit: recall over the faults, precision over the
findings, so listing every possible cause earns little and "something is wrong" nothing.
A fault-free world (a control) wants ``healthy: true`` and no finding: 1.0, else 0.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .report import Finding, Report
from .truth import Truth, canonical, names

WEIGHTS = {"where": 0.5, "cause": 0.3, "identity": 0.2}
LEVELS = ("repair", "diagnose", "localise", "detect")
"""the task levels (``fixos.episodes.tasks``): ``diagnose`` and ``repair`` grade a report with
``WEIGHTS``; ``localise`` asks only where (a finding naming a fault's host and component
earns it 1.0: a cause and identity earn nothing more); ``detect`` only whether anything is
wrong (``healthy`` right: 1.0, findings not read)."""
_WHERE_ONLY = {"where": 1.0, "cause": 0.0, "identity": 0.0}


@dataclass(frozen=True)
class Diagnosis:
    score: float
    recall: float
    precision: float
    per_fault: list[dict[str, object]] = field(default_factory=list)
    """for each fault: its type and host, the finding matched (index) and the credit earned"""


def _same_place(said: str, truth: str) -> bool:
    if said == truth:
        return True
    kind_a, _, a = said.partition(":")
    kind_b, _, b = truth.partition(":")
    paths = {"file", "fs"}
    if kind_a in paths and kind_b in paths and a.startswith("/") and b.startswith("/"):
        return a.startswith(b + "/")  # a file inside the fault's directory; a vaguer parent is not
    return False


def credit(finding: Finding, truth: Truth, weights: dict[str, float] = WEIGHTS) -> float:
    if finding.host != truth.host:
        return 0.0
    component = canonical(finding.component)
    if not any(_same_place(component, c) for c in truth.components):
        return 0.0
    where = weights["where"] + (0.0 if truth.identities else weights["identity"])
    earned = where + (weights["cause"] if finding.cause == truth.cause else 0.0)
    if truth.identities and weights["identity"]:
        text = f"{finding.component} {finding.evidence}"
        named = sum(1 for i in truth.identities if names(i, text))
        earned += weights["identity"] * named / len(truth.identities)
    return round(earned, 6)


def _best(table: list[list[float]], faults: int) -> tuple[float, list[int | None]]:
    """The most credit of a one-to-one pairing (findings x faults), by findings in turn over
    the set of faults already taken; and each fault's finding."""
    best: dict[int, tuple[float, tuple[int | None, ...]]] = {0: (0.0, (None,) * faults)}
    for i, row in enumerate(table):
        nxt = dict(best)
        for taken, (total, pairs) in best.items():
            for j, value in enumerate(row):
                if value > 0 and not taken & (1 << j):
                    key = taken | (1 << j)
                    candidate = (total + value, (*pairs[:j], i, *pairs[j + 1 :]))
                    if candidate[0] > nxt.get(key, (-1.0, ()))[0]:
                        nxt[key] = candidate
        best = nxt
    total, pairs = max(best.values(), key=lambda v: v[0])
    return total, list(pairs)


def grade(report: Report | None, faults: list[Truth], level: str = "diagnose") -> Diagnosis:
    """The diagnosis a report earns at a task level (None: no report, which earns 0.0)."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)} (got {level!r})")
    if not faults:  # a fault-free control
        right = report is not None and report.healthy and not report.findings
        return Diagnosis(1.0 if right else 0.0, 1.0 if right else 0.0, 1.0 if right else 0.0)
    missed = [{"type": t.type, "host": t.host, "finding": None, "credit": 0.0} for t in faults]
    if level == "detect":
        right = report is not None and not report.healthy
        return Diagnosis(1.0 if right else 0.0, 1.0 if right else 0.0, 1.0 if right else 0.0, missed)
    if report is None or report.healthy or not report.findings:
        return Diagnosis(0.0, 0.0, 0.0, missed)
    weights = _WHERE_ONLY if level == "localise" else WEIGHTS
    table = [[credit(f, t, weights) for t in faults] for f in report.findings]
    total, pairs = _best(table, len(faults))
    recall, precision = total / len(faults), total / len(report.findings)
    score = 0.0 if total == 0 else 2 * recall * precision / (recall + precision)
    per_fault = [
        {"type": t.type, "host": t.host, "finding": i, "credit": table[i][j] if i is not None else 0.0}
        for j, (t, i) in enumerate(zip(faults, pairs, strict=True))
    ]
    return Diagnosis(round(score, 4), round(recall, 4), round(precision, 4), per_fault)
