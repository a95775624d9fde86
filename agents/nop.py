"""Does nothing: every scenario must score it 0."""

from __future__ import annotations

from fixos.agents.base import Task
from fixos.shells.base import Shell


class NopAgent:
    name = "nop"

    def solve(self, task: Task, shell: Shell) -> None:
        return None
