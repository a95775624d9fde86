"""The Shell contract under attack: whatever the host or the transport does, ``run``
gives a CommandResult or raises ShellError, never a paramiko, docker-py or OS
exception; a fork bomb in the session dies with it and the harness keeps control."""

from __future__ import annotations

import time

import paramiko
import pytest
from docker.errors import APIError

from fixos.core.errors import ShellError
from fixos.core.models import CommandResult
from fixos.shells import session
from fixos.shells.session import BashSession


@pytest.fixture
def _short_patience(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "_SIDE_PATIENCE", 1.5)


class _Scripted(BashSession):
    """A transport that answers the prelude, then fails at ``fail_at`` with ``error``."""

    def __init__(self, fail_at: str, error: Exception) -> None:
        super().__init__()
        self.fail_at, self.error = fail_at, error
        self._pending = b""
        self.sides = 0
        self._open(restore=False)

    @property
    def where(self) -> str:
        return "scripted"

    def _maybe_fail(self, primitive: str) -> None:
        if self._pgid and primitive == self.fail_at:  # the prelude always gets through
            raise self.error

    def _start(self) -> None:
        pass

    def _send(self, data: bytes) -> None:
        self._maybe_fail("send")
        nonce = data.decode().rsplit("__FIXOS_", 1)[1].split("__")[0]
        reply = b"4242\n" if not self._pgid else b""
        if self.fail_at != "timeout" or not self._pgid:
            self._pending = reply + f"\n__FIXOS_{nonce}__ 0\n".encode()

    def _read(self, wait: float) -> bytes | None:
        self._maybe_fail("read")
        if self.fail_at == "ended" and self._pgid:
            return None
        chunk, self._pending = self._pending, b""
        if not chunk:
            time.sleep(min(wait, 0.01))
        return chunk

    def _side(self, script: str) -> None:
        self.sides += 1
        raise self.error

    def _ended_code(self) -> int:
        raise self.error

    def _stop(self) -> None:
        pass


TRANSPORT_ERRORS = {
    "paramiko_channel_closed": paramiko.SSHException("Channel closed."),
    "docker_api_error": APIError("OCI runtime exec failed: fork/exec: resource temporarily unavailable"),
    "os_error": ConnectionResetError(104, "Connection reset by peer"),
    "eof": EOFError(),
}


@pytest.mark.usefixtures("_short_patience")
@pytest.mark.parametrize("where", ["read", "ended", "timeout"])
@pytest.mark.parametrize("error", list(TRANSPORT_ERRORS))
def test_no_transport_exception_escapes_the_contract(where: str, error: str) -> None:
    shell = _Scripted(where, TRANSPORT_ERRORS[error])
    with pytest.raises(ShellError) as raised:
        shell.run("echo hi", timeout=0.2)
    assert "\n" not in str(raised.value), "one-line messages"
    with pytest.raises(ShellError, match="closed"):
        shell.run("echo again")


@pytest.mark.usefixtures("_short_patience")
def test_a_failing_side_command_is_retried_then_a_shell_error() -> None:
    shell = _Scripted("timeout", TRANSPORT_ERRORS["docker_api_error"])
    started = time.monotonic()
    with pytest.raises(ShellError, match="beside the shell"):
        shell.run("sleep 100", timeout=0.1)
    assert shell.sides > 3, "a host short of PIDs gets several tries"
    assert time.monotonic() - started < 5


def test_a_healthy_scripted_session_still_answers() -> None:
    shell = _Scripted("never", TRANSPORT_ERRORS["os_error"])
    result = shell.run("true")
    assert (result.output, result.exit_code, result.timed_out) == ("", 0, False)


# -- live: a fork bomb in the agent's own session --------------------------------------------

BOMB_IN_SESSION = ":(){ :|:& };:"
BOMB_DETACHED = "(setsid bash -c ':(){ :|:& };:' </dev/null >/dev/null 2>&1 &); sleep 3"


def _answers(shell, command: str, timeout: float) -> CommandResult | ShellError:
    try:
        return shell.run(command, timeout=timeout)
    except ShellError as exc:
        return exc


@pytest.mark.live
def test_a_fork_bomb_in_the_session_gives_a_result_or_a_shell_error(any_shell) -> None:
    """The bomb's command times out; the harness kills what it can reach beside the session
    (retrying while forks fail) and opens a new one, or, when the host cannot fork at all
    (sshd cannot open a side channel; the bomb left the session's process group), the
    session is lost as a ShellError. Either way in bounded time, and later runs too."""
    started = time.monotonic()
    outcome = _answers(any_shell, BOMB_IN_SESSION + "; sleep 30", timeout=3)
    assert isinstance(outcome, CommandResult | ShellError), outcome
    if isinstance(outcome, CommandResult):
        assert outcome.timed_out
    assert time.monotonic() - started < 60, "timeout, grace, side retries, reopen"
    started = time.monotonic()
    later = _answers(any_shell, "echo after", timeout=5)
    assert isinstance(later, CommandResult | ShellError), later
    assert time.monotonic() - started < 60


@pytest.mark.live
def test_a_detached_fork_bomb_gives_results_or_shell_errors_only(any_shell) -> None:
    """A bomb outside the session's group fills the PID limit for good: commands may fail,
    but only as the contract says, and each comes back in bounded time."""
    _answers(any_shell, BOMB_DETACHED, timeout=10)
    for command in ("echo one", "ps -e | wc -l", "echo three"):
        started = time.monotonic()
        outcome = _answers(any_shell, command, timeout=3)
        assert isinstance(outcome, CommandResult | ShellError), outcome
        assert time.monotonic() - started < 3 + 3 + 15 + 10, "timeout, grace, side retries, reopen"
