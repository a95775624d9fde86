"""The llm agent reads real-world reply shapes: DONE however it is wrapped, a command
in whatever block, a reply with no command is a step that says so; every [STEP] line
carries a numeric reward. Run against a fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from helpers import ChatServer

from fixos.agents.base import Task
from fixos.agents.llm import NO_COMMAND, LlmAgent, read_reply
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
