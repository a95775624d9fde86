"""The agent's shell wrapper records every step and enforces the budget."""

from __future__ import annotations

import pytest

from fixos.core.errors import BudgetExhausted
from fixos.shells import FakeShell, RecordingShell


def test_records_steps_and_stops_at_the_budget():
    inner = FakeShell(lambda c: ("out of " + c, 3))
    shell = RecordingShell(inner, max_steps=2, wall_seconds=60, command_timeout=5)
    shell.run("a")
    shell.run("b")
    with pytest.raises(BudgetExhausted, match="2 commands"):
        shell.run("c")
    assert [s.command for s in shell.steps] == ["a", "b"]
    assert shell.steps[1].output == "out of b" and shell.steps[1].exit_code == 3
    assert inner.commands == ["a", "b"]


def test_wall_time_budget():
    shell = RecordingShell(FakeShell(lambda c: ""), max_steps=5, wall_seconds=0.0, command_timeout=5)
    with pytest.raises(BudgetExhausted, match="wall-time"):
        shell.run("a")
