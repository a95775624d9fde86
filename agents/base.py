"""The Agent contract: given what the user reported and a shell, repair the host.

An agent sees only its ``Task`` and the shell: never the scenario's faults,
checks or solution (the oracle is handed the solution explicitly).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import FixOSError, UnknownTypeError
from ..core.registry import Registry
from ..shells.base import Shell


@dataclass(frozen=True)
class Endpoints:
    """How a person or an outside program reaches the broken host."""

    ssh: str
    docker_exec: str
    key_path: str
    host: str = ""
    """the host these reach (a multi-host scenario's login host)."""
    others: list[str] = field(default_factory=list)
    """the scenario's other hosts, reached with ``ssh NAME`` from ``host``."""


@dataclass(frozen=True)
class Task:
    """All an agent is told: the user's report, its budget, and where to keep notes."""

    scenario: str
    instruction: str
    max_steps: int
    wall_seconds: float
    workdir: Path | None = None
    """a directory of the episode's results where the agent may write its own logs."""
    endpoints: Endpoints | None = None
    """given only to agents that set ``wants_endpoints = True``."""
    level: str = "repair"
    """the task level (``fixos.episodes.tasks``): ``repair``, or ``diagnose``, ``localise``,
    ``detect``: report only, and leave the host as found (the instruction says so too)."""


class Agent(Protocol):
    """What FixOS calls. Optional extras, looked up by name:

    - ``wants_endpoints = True``: the task carries the SSH/exec commands and key path;
    - ``finish(verdict)``: called with the verifier's verdict after the episode.
    """

    name: str

    def solve(self, task: Task, shell: Shell) -> None:
        """Run commands through ``shell`` until done; raising BudgetExhausted is fine."""
        ...


FIRST_FIXES = "first-fixes:"
"""``first-fixes:K``: calibration's budget-limited oracle, which knows the first K faults' fixes"""

AGENTS: Registry[Agent] = Registry(
    "agent",
    key="name",
    lazy={
        "oracle": "fixos.agents.oracle:OracleAgent",
        "nop": "fixos.agents.nop:NopAgent",
        "partial": "fixos.agents.oracle:PartialAgent",
        "shotgun": "fixos.agents.nop:ShotgunAgent",
        "meddler": "fixos.agents.nop:MeddlerAgent",
        "baseline": "fixos.agents.baseline:BaselineAgent",
        "llm": "fixos.agents.llm:LlmAgent",
        "external": "fixos.agents.external:ExternalAgent",
        "human": "fixos.agents.human:HumanAgent",
    },
)


def agent_class(name: str) -> type[Agent]:
    """A registered agent, one of yours by import path (``mypkg.mod:MyAgent``),
    or a cheating strategy the verifier must see through (``adversary:<name>``)."""
    if name.startswith("adversary:"):
        from .adversarial import adversary_class  # imports the scenario schema

        return adversary_class(name)
    if name.startswith(FIRST_FIXES):
        from .oracle import first_fixes_class

        return first_fixes_class(name)
    if ":" not in name:
        return AGENTS.get(name)
    module, _, attr = name.partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise UnknownTypeError("agent", name, AGENTS.names()) from exc
    if not callable(getattr(cls, "solve", None)):
        raise FixOSError(f"agent {name}: {attr} has no solve(task, shell) method")
    return cls


def make_agent(name: str, *, solutions: dict[str, str | None], truth: dict[str, Any] | None = None) -> Agent:
    """An agent by name; the reference agents are handed their script (and the oracle the
    ground truth, to report: ``wants_truth``), no one else is."""
    cls = agent_class(name)
    key = getattr(cls, "solution_key", None)
    if key is None:
        return cls()
    script = solutions.get(key)
    if script is None:
        raise UnknownTypeError("solution for agent " + name, key, [k for k, v in solutions.items() if v])
    agent = cls(solution=script)  # type: ignore[call-arg]
    if getattr(cls, "wants_truth", False):
        agent.truth = truth  # type: ignore[attr-defined]
    return agent
