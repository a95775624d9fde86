"""Wraps the agent's shell: records every step and enforces the step and time budget."""

from __future__ import annotations

import time

from ..core.errors import BudgetExhausted, ShellError
from ..core.models import CommandResult, Step
from .base import Shell
from .stopping import check_stop

SESSION_LOST_EXIT_CODE = -1
"""a step's exit code when its command broke the session itself (no exit status came back)."""


class RecordingShell:
    def __init__(
        self,
        inner: Shell,
        *,
        max_steps: int,
        wall_seconds: float,
        command_timeout: float,
        on_step=None,
    ) -> None:
        self._inner = inner
        self.max_steps = max_steps
        self.command_timeout = command_timeout
        self.deadline = time.monotonic() + wall_seconds
        self.steps: list[Step] = []
        self._on_step = on_step

    @property
    def remaining_steps(self) -> int:
        return self.max_steps - len(self.steps)

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        check_stop()  # the harness is stopping: no new command, whatever the agent wants
        if self.remaining_steps <= 0:
            raise BudgetExhausted(f"step budget of {self.max_steps} commands used up")
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise BudgetExhausted("wall-time budget used up")
        limit = min(timeout or self.command_timeout, self.command_timeout, max(left, 0.1))
        started = time.time()
        try:
            result = self._inner.run(command, timeout=limit)
        except ShellError as exc:
            # The command that broke the session stays in the transcript, with why.
            lost = Step(
                index=len(self.steps),
                command=command,
                output=f"[fixos: the session broke: {exc}]",
                exit_code=SESSION_LOST_EXIT_CODE,
                duration=time.time() - started,
                started_at=started,
            )
            self.steps.append(lost)
            if self._on_step is not None:
                self._on_step(lost)
            check_stop()  # torn down under it by Ctrl-C: not the agent's doing
            raise
        step = Step(
            index=len(self.steps),
            command=command,
            output=result.output,
            exit_code=result.exit_code,
            duration=result.duration,
            started_at=started,
            timed_out=result.timed_out,
        )
        self.steps.append(step)
        if self._on_step is not None:
            self._on_step(step)
        return result

    def close(self) -> None:
        self._inner.close()
