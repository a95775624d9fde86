"""A Shell that answers from a function, for unit tests of faults, checks and agents."""

from __future__ import annotations

from collections.abc import Callable

from ..core.models import CommandResult

Handler = Callable[[str], tuple[str, int] | str]


class FakeShell:
    """``FakeShell(handler)``: ``handler(command)`` returns output, or (output, exit_code)."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self.commands: list[str] = []
        self.closed = False

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        self.commands.append(command)
        answer = self._handler(command)
        output, code = (answer, 0) if isinstance(answer, str) else answer
        return CommandResult(command=command, output=output, exit_code=code, duration=0.0)

    def close(self) -> None:
        self.closed = True
