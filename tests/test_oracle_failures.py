"""The oracle says where a reference repair stopped (line, exit code, last output), the
record keeps it typed, and ``fixos validate``'s reasons name it, or the checks that
decided the reward. Fast: the scripts run in this machine's bash, no container."""

from __future__ import annotations

import subprocess

import pytest

from fixos.agents.base import Task
from fixos.agents.oracle import OracleAgent, PartialAgent, run_solution
from fixos.bench.validate import why
from fixos.core.errors import SolutionFailed
from fixos.core.models import CheckResult, ScriptFailure, Verdict
from fixos.records.failures import EpisodeStatus, FailureKind, agent_failure
from fixos.records.models import EpisodeRecord, Timings
from fixos.shells.fake import FakeShell


def bash(command: str) -> tuple[str, int]:
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30)
    return done.stdout + done.stderr, done.returncode


TASK = Task("x", "fix it", 5, 60.0)


@pytest.mark.parametrize(
    ("script", "line", "code"),
    [
        ("grep -q nothing-here /dev/null\necho never", 1, 1),
        ("echo one\nif true; then\n  ls /no/such/dir\nfi\necho never", 3, 2),
        ("echo one\nFOO=1 \\\n  false\necho never", 2, 1),
        ("echo one\nsh -s <<'EOF'\nexit 4\nEOF\necho never", 2, 4),
        ("echo one\nprintf 'x\\n' | grep -q y | cat", 2, 1),
    ],
    ids=["first-line", "inside-if", "continued", "heredoc", "pipefail"],
)
def test_the_failing_line_and_its_exit_code_are_named(script, line, code):
    failure = run_solution(FakeShell(bash), script)
    assert failure == ScriptFailure(code, line, script.splitlines()[line - 1], failure.output)
    assert "never" not in failure.output and "FIXOS-SOLUTION-FAILED" not in failure.output
    assert failure.describe().startswith(f"solution line {line} (`{script.splitlines()[line - 1].strip()}`)")


def test_an_exit_or_an_unset_variable_names_no_line_but_keeps_the_output():
    failure = run_solution(FakeShell(bash), "echo before\nexit 5")
    assert (failure.exit_code, failure.line, failure.output) == (5, None, "before")
    assert failure.describe() == "the solution exited 5"
    unset = run_solution(FakeShell(bash), "echo $NOT_SET_ANYWHERE")
    assert unset.line is None and "NOT_SET_ANYWHERE: unbound variable" in unset.output


def test_a_solution_that_succeeds_is_no_failure_and_the_oracle_raises_none():
    assert run_solution(FakeShell(bash), "true\necho fine") is None
    OracleAgent("true").solve(TASK, FakeShell(bash))


def test_the_oracle_and_the_partial_raise_it_and_the_record_keeps_it_typed():
    for agent in (OracleAgent("true\nfalse"), PartialAgent("true\nfalse")):
        with pytest.raises(SolutionFailed) as caught:
            agent.solve(TASK, FakeShell(bash))
    failure = agent_failure(caught.value)
    assert failure.kind is FailureKind.agent_error and failure.script == ScriptFailure(1, 2, "false", "")
    assert failure.text == "agent_error: solution line 2 (`false`) exited 1"
    again = EpisodeRecord.model_validate_json(record("partial", 0.0, failure=failure).model_dump_json())
    assert again.failure == failure


def record(agent: str, reward: float, **fields) -> EpisodeRecord:
    checks = [
        CheckResult("nginx is running", "service_running", False, True, 1.0, "nginx: no pid file"),
        CheckResult("the page", "http_page", True, True, 1.0, "200, same body"),
        CheckResult("steady: logs kept", "logs_kept", True, False, 1.0, "all there"),
    ]
    return EpisodeRecord(
        run_id="r",
        episode_id=f"x-s1-{agent}",
        scenario="x",
        difficulty="easy",
        seed=1,
        agent=agent,
        status=EpisodeStatus.scored,
        reward=reward,
        solved=reward == 1.0,
        steps=1,
        timings=Timings(),
        verdict=Verdict(reward, checks),
        **fields,
    )


def test_validate_says_which_line_stopped_the_oracle_and_what_is_still_broken():
    script = ScriptFailure(1, 1, "grep -q x /etc/hostname", "grep: warning\nlast words")
    failure = agent_failure(SolutionFailed(script))
    assert why("oracle", record("oracle", 0.5, failure=failure)) == [
        "oracle scored 0.50, wanted = 1.0",
        "solution line 1 (`grep -q x /etc/hostname`) exited 1, its last output:",
        "  | grep: warning",
        "  | last words",
        "check failed: nginx is running (scored): nginx: no pid file",
    ]


def test_validate_names_the_checks_when_the_solution_ran_fine():
    assert why("partial", record("partial", 0.0))[1:] == [
        "check failed: nginx is running (scored): nginx: no pid file"
    ]
    assert why("nop", record("nop", 0.5))[1:] == ["check passed without a repair: the page: 200, same body"]
    assert why("partial", record("partial", 1.0))[1:] == [
        "every check passed: the partial repair repairs it all"
    ]
    assert why("partial", record("partial", 0.5)) == []
    assert why("oracle", record("oracle", 0.5), checks=0)[1:] == ["(+1 more checks)"]
