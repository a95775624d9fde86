"""The report an agent gives: ``{"healthy": false, "findings": [{"host", "component", "cause",
"evidence"}]}``. One that does not parse is refused in one line naming the field."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

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

    @model_validator(mode="after")
    def _known_cause(self) -> Finding:
        if self.cause not in CAUSES:
            raise ValueError(f"cause {self.cause!r} is none of {', '.join(CAUSES)}")
        return self


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
