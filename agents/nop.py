"""Does nothing: every scenario must score it 0."""

from __future__ import annotations

from typing import Any

from ..shells.base import Shell
from .base import Task


class NopAgent:
    name = "nop"

    def solve(self, task: Task, shell: Shell) -> None:
        return None


class ShotgunAgent(NopAgent):
    """Touches nothing and reports everything: every component a fault type names, on every
    host, with its likeliest cause (50 findings). The grading must give it at most 0.3."""

    name = "shotgun"

    def report(self) -> dict[str, Any]:
        from ..injector.recipes import RECIPES

        components = list(dict.fromkeys((r.component, r.cause) for r in RECIPES))
        findings = [
            {"host": host, "component": c, "cause": cause, "evidence": "it could be this"}
            for host in ("web", "app", "db")
            for c, cause in components
        ]
        return {"healthy": False, "findings": findings[:50]}
