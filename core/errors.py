"""Every error FixOS raises on purpose; catch ``FixOSError`` to catch them all.

FixOSError
├── ScenarioError        a scenario file is malformed (names file and field)
├── UnknownTypeError     a fault, check or agent name nobody registered
├── EngineError          no Docker engine answers, or an image cannot be built
│   └── SetupFailed      a set-up step failed: names the step and its log, holds the log's tail
├── StackError           a host did not boot or became unreachable
├── ShellError           a shell session broke (transport died twice)
├── InvalidEpisode       the world could not be set up as the scenario says;
│   │                    such an episode is never scored
│   └── UnhealthyHost    a check fails on the healthy host, before any fault
├── RecordError          a saved file (results/…) is malformed or of another schema version
├── BudgetExhausted      an agent used up its steps or wall time
└── SolutionFailed       a reference repair (oracle, partial) exited non-zero: the agent's failure
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .models import ScriptFailure


class FixOSError(Exception):
    """Root of every error FixOS raises on purpose."""


class ScenarioError(FixOSError):
    """A scenario file that cannot be loaded; the message is one line."""

    def __init__(self, path: str, field: str, problem: str) -> None:
        self.path, self.field, self.problem = path, field, problem
        where = f"{path}: {field}" if field else path
        super().__init__(f"{where}: {problem}")


class UnknownTypeError(FixOSError):
    def __init__(self, kind: str, name: str, choices: list[str]) -> None:
        self.kind, self.name, self.choices = kind, name, choices
        super().__init__(f"unknown {kind} {name!r}; choose one of: {', '.join(sorted(choices))}")


class EngineError(FixOSError):
    pass


class SetupFailed(EngineError):
    """A set-up step (an image build, an install) failed; the message is one line naming the
    step and the set-up log, ``tail`` the last lines the step wrote there (fixos.stack.setup_log)."""

    def __init__(self, step: str, problem: str, log: str, tail: list[str] | None = None) -> None:
        self.step, self.problem, self.log = step, problem, log
        self.tail = tail or []
        super().__init__(f"{step} failed: {problem}; its output is in {log}")

    def report(self) -> list[str]:
        """The message, then the tail indented: what a command prints when set-up fails."""
        if not self.tail:
            return [str(self)]
        return [f"{self}, its last lines:", *(f"    {line}" for line in self.tail)]


class StackError(FixOSError):
    pass


class ShellError(FixOSError):
    pass


class InvalidEpisode(FixOSError):
    """The broken world could not be built or confirmed: a harness fault, not a score."""


class UnhealthyHost(InvalidEpisode):
    """A check fails on the host before any fault: the scenario or image is broken, not the fault."""


class RecordError(FixOSError):
    """A saved file that cannot be read back; the message is one line naming file (and line)."""

    def __init__(self, path: str, problem: str, line: int | None = None) -> None:
        self.path, self.problem, self.line = path, problem, line
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {problem}")


class BudgetExhausted(FixOSError):
    pass


class SolutionFailed(FixOSError):
    """A scenario's reference repair stopped on a failing line; ``failure`` says where and how."""

    def __init__(self, failure: ScriptFailure) -> None:
        self.failure = failure
        super().__init__(failure.describe())
