"""What the agent does to its host or its own shell is scored, never invalid
(``fixos.episodes.blame``, the failure table): killing its shell, removing bash, a fork
bomb, a full disk, halting the host, over docker exec and over SSH. The
transcript keeps the command that broke things; the bomb dies at teardown.
Only the engine's own evidence (it does not answer, a host is gone from it)
makes an episode invalid."""

from __future__ import annotations

import docker
import pytest
from docker.errors import DockerException, NotFound

from fixos.agents import Task
from fixos.core.errors import ShellError
from fixos.episodes.blame import harness_evidence
from fixos.episodes.episode import run_episode
from fixos.records.failures import FAILURES, AtFault, EpisodeStatus, FailureKind, agent_failure
from fixos.scenarios.catalog import load_catalog
from fixos.shells.base import Shell
from fixos.shells.fake import FakeShell
from fixos.shells.recording import SESSION_LOST_EXIT_CODE, RecordingShell
from fixos.stack.hosts import LABEL_RUN

CATALOG = load_catalog()


class _Commands:
    """Runs its commands one after another, each a step; the shell's errors end it."""

    name = "commands"
    commands: tuple[str, ...] = ()

    def solve(self, task: Task, shell: Shell) -> None:
        for command in self.commands:
            shell.run(command)


class ExitsItsShell(_Commands):
    name = "exits-its-shell"
    commands = ("exit 3", "echo back")


class Halts(_Commands):
    name = "halts"
    commands = ("halt", "echo after the halt")


class RemovesBashThenExits(_Commands):
    """Its session ends with bash gone: no new session can start, a ShellError from its own shell."""

    name = "removes-bash-then-exits"
    commands = ("mv /usr/bin/bash /usr/bin/.gone; exit 0", "echo unreachable")


class FillsTheDisk(_Commands):
    name = "fills-the-disk"
    commands = ("cat /dev/zero > /var/log/fill; df -h /var/log",)


class StopsItsHost:
    """Its host stops while the engine answers (as a host halted from inside would)."""

    name = "stops-its-host"
    wants_endpoints = True

    def solve(self, task: Task, shell: Shell) -> None:
        assert task.endpoints is not None
        container = task.endpoints.docker_exec.split()[3]
        shell.run("echo about to stop")
        docker.from_env().api.kill(container)
        shell.run("echo after the stop")


BREAKERS = {
    "fork_bomb": ("adversary:fork_bomb", ":(){"),
    "hide_bash": ("adversary:hide_bash", "mv /usr/bin/bash"),
    "kill_shell": ("adversary:kill_shell", "pkill -9 -x bash"),
    "exit": ("test_agent_failures:ExitsItsShell", "exit 3"),
    "bash_gone_exit": ("test_agent_failures:RemovesBashThenExits", "mv /usr/bin/bash"),
    "halt": ("test_agent_failures:Halts", "halt"),
    "disk_full": ("test_agent_failures:FillsTheDisk", "cat /dev/zero"),
    "host_stopped": ("test_agent_failures:StopsItsHost", "echo after the stop"),
}
"""case -> (agent, a piece of the breaking command the transcript must keep)."""


def _remaining(client: docker.DockerClient, run_id: str) -> list[str]:
    return [c.name for c in client.containers.list(all=True, filters={"label": f"{LABEL_RUN}={run_id}"})]


@pytest.mark.live
@pytest.mark.parametrize("transport", ["exec", "ssh"])
@pytest.mark.parametrize("case", list(BREAKERS))
def test_what_the_agent_breaks_is_scored_never_invalid(
    client: docker.DockerClient, images: dict[str, str], test_run_id: str, case: str, transport: str
) -> None:
    agent, breaking = BREAKERS[case]
    record, steps = run_episode(
        CATALOG["easy_1"], 1, agent, client=client, images=images, run_id=test_run_id, transport=transport
    )
    assert record.status is EpisodeStatus.scored, record.failure
    assert record.reward == 0.0, record.verdict  # easy_1's nginx was never started
    if record.failure is not None:
        assert FAILURES[record.failure.kind].at_fault is AtFault.agent, record.failure
    assert any(breaking in s.command for s in steps), [s.command for s in steps]
    if case == "bash_gone_exit":
        assert record.failure is not None and record.failure.kind is FailureKind.agent_shell_lost
        assert steps[-1].exit_code == SESSION_LOST_EXIT_CODE and "the session broke" in steps[-1].output
    assert _remaining(client, test_run_id) == []  # the bomb and its host are gone at teardown


class _Engine:
    """A client whose engine answers or not, with some containers known."""

    def __init__(self, *, answers: bool, known: set[str]) -> None:
        self.answers, self.known = answers, known
        self.api = self

    def ping(self) -> bool:
        if not self.answers:
            raise DockerException("connection refused")
        return True

    def inspect_container(self, container_id: str) -> dict:
        if container_id not in self.known:
            raise NotFound("no such container")
        return {"State": {"Running": False}}


def test_only_the_engines_own_evidence_blames_the_harness() -> None:
    assert (
        harness_evidence(_Engine(answers=True, known={"a" * 64}), ["a" * 64]) is None
    )  # stopped: the agent's
    assert "does not answer" in (harness_evidence(_Engine(answers=False, known=set()), ["a" * 64]) or "")
    assert "gone from the engine" in (harness_evidence(_Engine(answers=True, known=set()), ["b" * 64]) or "")


def test_the_agents_kinds_are_scored_and_the_harness_kinds_are_not() -> None:
    for kind in (FailureKind.agent_shell_lost, FailureKind.host_unjudgeable, FailureKind.agent_error):
        assert FAILURES[kind].status is EpisodeStatus.scored and not FAILURES[kind].retried
    for kind in (FailureKind.engine_error, FailureKind.boot_failed, FailureKind.fault_unconfirmed):
        assert FAILURES[kind].status is EpisodeStatus.invalid


def test_the_transcript_keeps_the_command_that_broke_the_session() -> None:
    def handler(command: str) -> str:
        if command == "exit":
            raise ShellError("cannot open a shell on container abc: bash not found")
        return "ok"

    seen: list[str] = []
    shell = RecordingShell(
        FakeShell(handler),
        max_steps=5,
        wall_seconds=60,
        command_timeout=5,
        on_step=lambda s: seen.append(s.command),
    )
    shell.run("mv /usr/bin/bash /tmp/")
    with pytest.raises(ShellError):
        shell.run("exit")
    assert [s.command for s in shell.steps] == ["mv /usr/bin/bash /tmp/", "exit"] == seen
    assert shell.steps[-1].exit_code == SESSION_LOST_EXIT_CODE and "bash not found" in shell.steps[-1].output
    assert agent_failure(ShellError("x")).kind is FailureKind.agent_shell_lost
