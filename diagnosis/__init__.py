"""Diagnosis scored deterministically: a structured report graded against the ground truth
of the injected faults (``truth``), by a one-to-one matching and an F-score (``grade``)."""

from .grade import WEIGHTS, Diagnosis, grade
from .report import Finding, Handed, Report, ReportError, parse_report, report_schema
from .truth import Truth, truths

__all__ = [
    "WEIGHTS",
    "Diagnosis",
    "Finding",
    "Handed",
    "Report",
    "ReportError",
    "Truth",
    "grade",
    "parse_report",
    "report_schema",
    "truths",
]
