"""The agent's report of what is wrong, graded beside the repair (``fixos.diagnosis``).

A report comes from the agent's ``report()`` (a built-in agent; the oracle is handed the
truth as it is handed the solution) or, for an agent working from outside (``external``),
from ``report.json`` in the run directory, which ``fixos verify RUN --report FILE`` writes;
the episode moves it into its own directory as it grades it. Nothing the
agent does inside a host can change it: the report is the only input. ``graded`` is the
one grading of a report's text, which the other interfaces call too (OpenEnv's server,
TRL's environment: ``fixos.diagnosis.Handed`` keeps what they were handed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.models import InjectedFault
from ..diagnosis import grade, parse_report, truths
from ..diagnosis.report import ReportError, report_text
from ..records.models import Diagnosed

REPORT_FILE = "report.json"


def diagnosed(
    agent: Any, workdir: Path | None, faults: list[InjectedFault], level: str = "repair"
) -> Diagnosed:
    """The diagnosis the agent's report earns on these faults, at the task's level."""
    source, text = "none", None
    report_of = getattr(agent, "report", None)
    given = report_of() if callable(report_of) else None
    if given is not None:
        source, text = "agent", report_text(given)
    elif getattr(agent, "wants_endpoints", False) and workdir is not None:
        # an agent working from outside: `fixos verify RUN --report` left it in the run's directory
        # (a run holds the one external episode); taken, so no later episode reads it again
        handed = workdir.parent / REPORT_FILE
        if handed.is_file():
            source, text = "file", handed.read_text(encoding="utf-8", errors="replace")
            handed.replace(workdir / REPORT_FILE)
    return graded(text, source, faults, level)


def graded(text: str | None, source: str, faults: list[InjectedFault], level: str = "repair") -> Diagnosed:
    """What a report's text earns on these faults at the task's level, as the record keeps it;
    ``source`` says how it came (``agent``: its ``report()``, an OpenEnv action, a TRL tool
    call; ``file``). No text is no report (``none``: 0.0 on a broken world); text that does
    not parse scores 0.0 and keeps its one-line error naming the field."""
    if text is None:
        source = "none"
    try:
        report = parse_report(text, where=f"{source} report") if text is not None else None
    except ReportError as exc:
        return Diagnosed(score=0.0, source=source, error=str(exc))
    result = grade(report, truths(faults), level)
    return Diagnosed(
        score=result.score,
        recall=result.recall,
        precision=result.precision,
        per_fault=result.per_fault,
        source=source,
    )
