"""The Agent contract: given what the user reported and a shell, repair the host.

An agent sees only its ``Task`` and the shell: never the scenario's faults,
checks or solution (the oracle is handed the solution explicitly).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fixos.registry import Registry
from shells.base import Shell


@dataclass(frozen=True)
class Task:
    instruction: str
    max_steps: int
    wall_seconds: float


class Agent(Protocol):
    name: str

    def solve(self, task: Task, shell: Shell) -> None:
        """Run commands through ``shell`` until done; raising BudgetExhausted is fine."""
        ...


AGENTS: Registry[Agent] = Registry(
    "agent",
    {
        "oracle": "agents.oracle:OracleAgent",
        "nop": "agents.nop:NopAgent",
    },
)


def make_agent(name: str, *, solution: str) -> Agent:
    cls = AGENTS.get(name)
    if getattr(cls, "wants_solution", False):
        return cls(solution=solution)  # type: ignore[call-arg]
    return cls()
