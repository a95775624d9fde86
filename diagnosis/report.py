"""The report an agent gives: ``{"healthy": false, "findings": [{"host", "component", "cause",
"evidence"}]}``. One that does not parse is refused in one line naming the field.

``Handed`` keeps the reports an agent hands over during an episode (an OpenEnv action, a TRL
tool call, a ``report`` reply of the built-in LLM agent): each interface takes them the same way."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core.errors import FixOSError
from ..injector.recipes import CAUSES


class Finding(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    host: str = Field(min_length=1, max_length=64)
    """the host's name (``web``, ``app``, ``db``)"""
    component: str = Field(min_length=1, max_length=300)
    """what is broken, canonically ``KIND:TARGET``: ``service:nginx``, ``file:/etc/...``,
    ``fs:/var/log``, ``process:<pid>``, ``port:80``, ``table:shop.orders``... (docs/diagnosis.md)"""
    cause: str
    """one of the root-cause classes (``fixos.injector.recipes.CAUSES``)"""
    evidence: str = Field(default="", max_length=4000)
    """what showed it; a seeded identity (a PID, a file) named here or in the component counts"""

    @field_validator("cause")
    @classmethod
    def _known_cause(cls, cause: str) -> str:
        # a field's validator, so the error names it: findings.0.cause
        if cause not in CAUSES:
            raise ValueError(f"cause {cause!r} is none of {', '.join(CAUSES)}")
        return cause


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    healthy: bool
    findings: list[Finding] = Field(default_factory=list, max_length=50)

    @model_validator(mode="after")
    def _consistent(self) -> Report:
        if self.healthy and self.findings:
            raise ValueError("a healthy report lists no findings")
        return self


class ReportError(FixOSError):
    pass


def parse_report(text: str, where: str = "report") -> Report:
    """The report in ``text`` (JSON), or a ReportError naming ``where`` and the field."""
    try:
        data: Any = json.loads(text)
    except ValueError as exc:
        raise ReportError(f"{where}: not JSON ({exc})") from None
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in err["loc"]) or "top level"
        raise ReportError(f"{where}: {field}: {err['msg'].removeprefix('Value error, ')}") from None


def report_schema() -> dict[str, Any]:
    return Report.model_json_schema()


def report_text(given: object) -> str:
    """A report as handed over (a JSON object, or its text), as text."""
    return given if isinstance(given, str) else json.dumps(given)


class Handed:
    """The reports one agent hands over in one episode. The last that parsed counts (a later
    report replaces an earlier one); until one parses, the last one given, so the record says
    why it scored 0.0. Nothing is graded before the episode ends: a running grade would let
    an agent search the ground truth report by report."""

    def __init__(self) -> None:
        self._valid: str | None = None
        self._last: str | None = None

    def take(self, given: object) -> str:
        """Keep ``given`` and say so in one line, or raise ReportError naming the field (an
        earlier report that parsed is kept)."""
        text = report_text(given)
        self._last = text
        report = parse_report(text)
        self._valid = text
        said = "healthy" if report.healthy else f"{len(report.findings)} finding(s)"
        return f"report kept ({said}); graded when the episode ends; a later report replaces it"

    @property
    def text(self) -> str | None:
        """What the episode grades: the last report that parsed, else the last one given, else None."""
        return self._valid if self._valid is not None else self._last
