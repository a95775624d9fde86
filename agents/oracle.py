"""Runs the scenario's reference repair: proves a scenario can be solved."""

from __future__ import annotations

import shlex

from fixos.agents.base import Task
from fixos.shells.base import Shell


class OracleAgent:
    name = "oracle"
    solution_key = "solution"

    def __init__(self, solution: str) -> None:
        self._solution = solution

    def solve(self, task: Task, shell: Shell) -> None:
        # One step, in a child bash, so an `exit` in the script ends only the script.
        shell.run(f"bash -euo pipefail -c {shlex.quote(self._solution)}")


class PartialAgent(OracleAgent):
    """Runs the scenario's partial repair: proves that partial credit is partial."""

    name = "partial"
    solution_key = "partial_solution"
