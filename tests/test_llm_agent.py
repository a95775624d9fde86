"""The llm agent reads real-world reply shapes: DONE however it is wrapped, a command
in whatever block, a report in a ```report block or a `report {...}` line, a reply with
no command is a step that says so; every [STEP] line carries a numeric reward. Run
against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from helpers import ChatServer

from fixos.agents.base import Task
from fixos.agents.llm import NO_COMMAND, SYSTEM_PROMPT, LlmAgent, read_reply
from fixos.core.models import InjectedFault
from fixos.episodes.diagnosed import diagnosed
from fixos.injector.recipes import CAUSES
from fixos.shells.fake import FakeShell

# A parser as log tools write them: every field present, reward a float.
STEP_LINE = re.compile(
    r"\[STEP\] step=(\d+) action=(null|\".*\") exit=(null|-?\d+) reward=(-?\d+\.\d+) "
    r"done=(true|false) error=(null|\".*\")"
)

REPLIES: list[tuple[str, str | None, bool]] = [
    # (reply, command it asks for, done)
    ("DONE", None, True),
    ("done", None, True),
    ("DONE.", None, True),
    ("DONE!", None, True),
    ('"DONE"', None, True),
    ("'DONE'", None, True),
    ("`DONE`", None, True),
    ("**DONE**", None, True),
    ("```\nDONE\n```", None, True),
    ("```bash\nDONE\n```", None, True),
    ("```text\nDONE\n```", None, True),
    ("```DONE```", None, True),
    ("nginx answers on port 80 again.\n\nDONE", None, True),
    ("The config is fixed and the service is running. DONE", None, True),
    ("All checks pass: DONE.", None, True),
    ("I'll check.\n```bash\nservice nginx status\n```", "service nginx status", False),
    ("```sh\nps aux | head\n```", "ps aux | head", False),
    ("```shell\ndf -h /\n```", "df -h /", False),
    ("```\ntail -n 20 /var/log/nginx/error.log\n```", "tail -n 20 /var/log/nginx/error.log", False),
    ("```bash\n$ uptime\n```", "uptime", False),
    ("```bash\nservice nginx start\n```\nThen I will say DONE.", "service nginx start", False),
    ("```bash\nservice nginx start\nDONE\n```", "service nginx start", False),
    ("Let me check the status:\n`service mariadb status`", "service mariadb status", False),
    ("uptime", "uptime", False),
    ("$ free -m", "free -m", False),
    ("echo DONE", "echo DONE", False),
    ("Looking at the logs.\nRunning:\n$ tail /var/log/syslog", "tail /var/log/syslog", False),
    ("Hmm, I need to think about this.\nThe server may be misconfigured.", None, False),
    ("", None, False),
    ("```bash\n\n```", None, False),
]


@pytest.mark.parametrize(("reply", "command", "done"), REPLIES)
def test_reply_shapes(reply: str, command: str | None, done: bool) -> None:
    said = read_reply(reply)
    assert (said.command, said.done) == (command, done)


@pytest.fixture
def chat_env(monkeypatch: pytest.MonkeyPatch):
    def start(replies: list[Any]) -> ChatServer:
        chat = ChatServer(replies)
        monkeypatch.setenv("API_BASE_URL", chat.url)
        monkeypatch.setenv("MODEL_NAME", "fake-model")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        started.append(chat)
        return chat

    started: list[ChatServer] = []
    yield start
    for chat in started:
        chat.close()


def _solve(
    replies: list[Any], chat_env, capsys, max_steps: int = 20
) -> tuple[FakeShell, list[str], ChatServer]:
    chat = chat_env(replies)
    shell = FakeShell(lambda command: ("ok\n", 0))
    LlmAgent().solve(Task("easy_1", "nginx is down", max_steps, 60.0), shell)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[STEP]")]
    return shell, lines, chat


@pytest.mark.parametrize(("reply", "command", "done"), [r for r in REPLIES if r[2]])
def test_done_however_wrapped_ends_the_episode_without_running_it(reply, command, done, chat_env, capsys):
    shell, lines, chat = _solve(["```bash\nservice nginx start\n```", reply, "uptime"], chat_env, capsys)
    assert shell.commands == ["service nginx start"], "DONE is never sent to the shell"
    assert len(chat.requests) == 2
    assert STEP_LINE.fullmatch(lines[-1]) and 'action="DONE"' in lines[-1] and "done=true" in lines[-1]


def test_a_reply_without_a_command_is_a_step_that_says_so(chat_env, capsys):
    prose = "Hmm, I need to think about this.\nThe server may be misconfigured."
    shell, lines, chat = _solve([prose, "```bash\nservice nginx start\n```", "DONE"], chat_env, capsys)
    assert shell.commands == ["service nginx start"]
    assert len(lines) == 3
    first = STEP_LINE.fullmatch(lines[0])
    assert first is not None and first.group(2) == "null" and json.loads(first.group(6)) == NO_COMMAND
    told = chat.requests[1]["messages"][-1]
    assert told["role"] == "user" and NO_COMMAND in told["content"]


def test_replies_without_commands_end_with_the_step_budget(chat_env, capsys):
    shell, lines, chat = _solve(["I am thinking.\nStill thinking."] * 10, chat_env, capsys, max_steps=4)
    assert shell.commands == [] and len(chat.requests) == 4 and len(lines) == 4


def test_every_step_line_parses_with_a_numeric_reward(chat_env, capsys):
    replies = [
        "`service nginx status`",
        "no idea\nat all",
        "```bash\nservice nginx start\n```",
        "Fixed. DONE",
    ]
    _shell, lines, _chat = _solve(replies, chat_env, capsys)
    assert len(lines) == 4
    for line in lines:
        match = STEP_LINE.fullmatch(line)
        assert match is not None, line
        assert float(match.group(4)) == 0.0


def test_content_given_as_parts_is_read(chat_env, capsys):
    parts = [{"type": "text", "text": "```bash\n"}, {"type": "text", "text": "uptime\n```"}]
    shell, _lines, _chat = _solve([parts, "DONE"], chat_env, capsys)
    assert shell.commands == ["uptime"]


FINDING = '{"host": "web", "component": "service:nginx", "cause": "%s"}'
TRUTH = '{"healthy": false, "findings": [%s]}' % (FINDING % "service_stopped")
BAD = '{"healthy": false, "findings": [%s]}' % (FINDING % "gremlins")

REPORTS: list[tuple[str, str | None, bool]] = [
    # (reply, the report's text it hands over, done)
    (f"```report\n{TRUTH}\n```", TRUTH, False),
    (f"Found it.\n```report\n{TRUTH}\n```\nDONE", TRUTH, True),
    ('```report\n{"healthy": false,\n "findings": []}\n```', '{"healthy": false,\n "findings": []}', False),
    (f"```REPORT\n{TRUTH}\n```", TRUTH, False),
    (f"report {TRUTH}", TRUTH, False),
    (f"`report {TRUTH}`", TRUTH, False),
    (f"```bash\nreport {TRUTH}\n```", TRUTH, False),
    (f"```bash\nreport {TRUTH}\nDONE\n```", TRUTH, True),
    (f"Here is what I found:\nreport {TRUTH}\nDONE", TRUTH, True),
    ("```bash\nreport-gen --all\n```", None, False),  # a command of that name, not a report
    ("```bash\necho report {x}\n```", None, False),
    ("```report\n\n```", None, False),
]


@pytest.mark.parametrize(("reply", "report", "done"), REPORTS)
def test_report_shapes(reply: str, report: str | None, done: bool) -> None:
    said = read_reply(reply)
    assert (said.report, said.done) == (report, done)
    if report is not None:
        assert said.command is None, "a report is never run"


def test_the_system_prompt_tells_the_model_how_to_report() -> None:
    assert "```report" in SYSTEM_PROMPT and '"findings"' in SYSTEM_PROMPT
    assert all(cause in SYSTEM_PROMPT for cause in CAUSES)


def test_a_report_is_kept_not_run_a_bad_one_is_refused_naming_the_field(chat_env, capsys):
    replies = [f"```report\n{TRUTH}\n```", f"```report\n{BAD}\n```", "```bash\nuptime\n```", "DONE"]
    chat = chat_env(replies)
    shell = FakeShell(lambda command: ("ok\n", 0))
    agent = LlmAgent()
    assert agent.report() is None
    agent.solve(Task("easy_1", "nginx is down", 20, 60.0), shell)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[STEP]")]
    assert shell.commands == ["uptime"], "reports are never sent to the shell"
    assert [STEP_LINE.fullmatch(line).group(2) for line in lines] == [
        '"report"',
        '"report"',
        '"uptime"',
        '"DONE"',
    ]
    assert STEP_LINE.fullmatch(lines[0]).group(6) == "null"
    refused = json.loads(STEP_LINE.fullmatch(lines[1]).group(6))
    assert refused.startswith("report: findings.0.cause: cause 'gremlins' is none of")
    kept, told = chat.requests[1]["messages"][-1], chat.requests[2]["messages"][-1]
    assert kept["role"] == "user" and kept["content"].startswith("[fixos: report kept (1 finding(s))")
    assert (
        told["content"].startswith("[fixos: report: findings.0.cause:")
        and "last report that parsed" in told["content"]
    )
    assert agent.report() == TRUTH, "the last report that parsed counts"
    faults = [InjectedFault("service_stopped", "web", {"service": "nginx"}, {}, "ok")]
    graded = diagnosed(agent, None, faults)
    assert (graded.score, graded.source) == (1.0, "agent")


def test_a_report_then_done_ends_and_a_report_that_never_parsed_scores_zero_with_its_error(chat_env, capsys):
    shell, lines, chat = _solve([f"```report\n{BAD}\n```\nDONE", "uptime"], chat_env, capsys)
    assert shell.commands == [] and len(chat.requests) == 1
    assert 'action="report"' in lines[-1] and "done=true" in lines[-1]
    chat_env([f"report {BAD}", "DONE"])
    agent = LlmAgent()  # after chat_env: it reads the endpoint from the environment
    agent.solve(Task("easy_1", "nginx is down", 20, 60.0), FakeShell(lambda command: ("", 0)))
    assert agent.report() == BAD
    graded = diagnosed(agent, None, [InjectedFault("service_stopped", "web", {"service": "nginx"}, {}, "ok")])
    assert graded.score == 0.0 and graded.error is not None and "findings.0.cause" in graded.error
