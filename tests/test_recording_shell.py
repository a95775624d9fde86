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


def test_a_new_session_is_waited_for_longer_on_a_loaded_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    from fixos.shells import session

    monkeypatch.setattr(session.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(session.os, "getloadavg", lambda: (0.5, 0.0, 0.0))
    assert session.open_wait() == session.OPEN_SECONDS  # a core to spare: the usual wait
    monkeypatch.setattr(session.os, "getloadavg", lambda: (6.0, 0.0, 0.0))
    assert session.open_wait() == 3 * session.OPEN_SECONDS  # three runnable tasks per core
    monkeypatch.setattr(session.os, "getloadavg", lambda: (60.0, 0.0, 0.0))
    assert (
        session.open_wait() == session.OPEN_SECONDS_MOST
    )  # bounded: a stopped session is not waited for ever
