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


class MeddlerAgent(NopAgent):
    """Changes nothing that matters, but touches: restarts the login host's web server and
    writes one of its configuration files back the same. On a fault-free control, and at a
    report-only task level, it must score 0.0 (``fixos.verifier.untouched``)."""

    name = "meddler"
    MEDDLING = (
        "cat /etc/nginx/nginx.conf > /tmp/.meddle && cat /tmp/.meddle > /etc/nginx/nginx.conf"
        " && rm -f /tmp/.meddle",
        "service nginx restart",
    )

    def solve(self, task: Task, shell: Shell) -> None:
        for command in self.MEDDLING:
            shell.run(command)
