"""The Agent contract: given what the user reported and a shell, repair the host.

An agent sees only its ``Task`` and the shell: never the scenario's faults,
checks or solution (the oracle is handed the solution explicitly).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from fixos.errors import UnknownTypeError
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
        "partial": "agents.oracle:PartialAgent",
    },
)


def make_agent(name: str, *, solutions: dict[str, str | None]) -> Agent:
    """An agent by name; the reference agents are handed their script, no one else is."""
    cls = AGENTS.get(name)
    key = getattr(cls, "solution_key", None)
    if key is None:
        return cls()
    script = solutions.get(key)
    if script is None:
        raise UnknownTypeError("solution for agent " + name, key, [k for k, v in solutions.items() if v])
    return cls(solution=script)  # type: ignore[call-arg]
