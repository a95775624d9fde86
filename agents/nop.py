"""Does nothing: every scenario must score it 0."""

from __future__ import annotations

from ..shells.base import Shell
from .base import Task


class NopAgent:
    name = "nop"

    def solve(self, task: Task, shell: Shell) -> None:
        return None
