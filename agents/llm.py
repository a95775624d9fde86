"""An agent driven by any OpenAI-compatible chat-completions endpoint.

Settings come from the environment, as in the FixOS baseline ``inference.py``:
``API_BASE_URL`` (e.g. ``https://api.openai.com/v1``), ``MODEL_NAME``, and
``HF_TOKEN`` or ``OPENAI_API_KEY``. One shell command per step; its output is
fed back (capped); ``DONE`` ends the episode. A reply may hand over a report of what is
wrong instead of a command (docs/diagnosis.md): a fenced block tagged ``report`` holding the
JSON, or the one-line command ``report {...}``; it is kept (the last that parses counts),
the model is told so or told the field that is wrong, and ``report()`` gives it to the
episode, which grades it at the end. It prints one machine-parsable line per event::

    [START] task=easy_1 env=fixos model=gpt-4o-mini
    [STEP] step=1 action="service nginx status" exit=3 reward=0.00 done=false error=null
    [END] success=true steps=2 score=1.00 rewards=1.00

and saves the whole conversation with token counts to ``llm_trajectory.jsonl``.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from ..core.errors import FixOSError
from ..core.models import Verdict
from ..diagnosis.report import Handed, ReportError
from ..injector.recipes import CAUSES
from ..shells.base import Shell
from ..shells.stopping import check_stop, stop_event
from .base import Task

SYSTEM_PROMPT = """You are an experienced site reliability engineer, logged in as root on a \
broken Debian server (sysvinit: use `service NAME start|stop|status`). Work like a careful \
engineer: look before you change, make the smallest repair, keep data and logs, never \
replace a service's configuration with a stub.

Reply with exactly one shell command per turn, in a ```bash code block. Commands run \
non-interactively with a timeout (no editors, no pagers; use sed, tee, cat <<EOF). \
When the problem is fixed, reply with the single word DONE.

To say what was wrong, reply with a ```report block instead of a command, holding JSON: \
{"healthy": false, "findings": [{"host": "web", "component": "service:nginx", "cause": \
"config_error", "evidence": "what showed it"}]}. A host is a server's name (its hostname); a \
component is KIND:TARGET (service:nginx, \
file:/etc/nginx/nginx.conf, fs:/var/log, process:PID, port:80); a cause is one of \
{causes}. A later report replaces an earlier one; DONE on its own line after the block \
hands it over and ends.""".replace("{causes}", ", ".join(CAUSES))
OUTPUT_CAP = 4000
RETRIES = 2


class LlmError(FixOSError):
    pass


def _settings() -> tuple[str, str, str]:
    base = os.environ.get("API_BASE_URL", "").rstrip("/")
    model = os.environ.get("MODEL_NAME", "")
    key = os.environ.get("HF_TOKEN") or os.environ.get("OPENAI_API_KEY") or ""
    missing = [n for n, v in (("API_BASE_URL", base), ("MODEL_NAME", model)) if not v]
    if not key:
        missing.append("HF_TOKEN or OPENAI_API_KEY")
    if missing:
        raise LlmError(f"the llm agent needs {', '.join(missing)} in the environment")
    return base, model, key


def _flat(text: str) -> str:
    return json.dumps(text)


_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n?(.*?)```", re.DOTALL)
_INLINE = re.compile(r"^\s*(?:\$\s*)?`([^`\n]+)`\s*$", re.MULTILINE)
_DECORATION = "\"'`*_~.!,;:()[]<> \t"
_SENTENCE_THEN_DONE = re.compile(r"[.!?:;\n]\W*\bDONE\b\W*$", re.IGNORECASE)
_REPORT_LINE = re.compile(r"^[ \t]*(?:\$[ \t]*)?`?report[ \t]+(\{.*\})`?[ \t]*$", re.MULTILINE)
"""the report said as a command on one line, ``report {...}`` (no host has a ``report`` program)."""
_FENCE_MARK = re.compile(r"^[ \t]*```[\w+-]*[ \t]*$", re.MULTILINE)
REPORT_TAG = "report"
NO_COMMAND = "no shell command in the reply"


@dataclass(frozen=True)
class Reply:
    """What a model's reply asks for: a command to run, a report to hand over, the end (DONE),
    or neither; a report may come with the end."""

    command: str | None = None
    done: bool = False
    report: str | None = None
    """the report's JSON text, not yet parsed (``fixos.diagnosis.Handed`` takes it)"""


def _is_done(text: str) -> bool:
    """DONE alone, however decorated: quoted, bold, in backticks, with punctuation."""
    return text.strip().strip(_DECORATION).upper() == "DONE"


def read_reply(reply: str) -> Reply:
    """The command in a model's reply, or its report, or that it is done, or neither.

    A report is a fenced block tagged ``report`` (its JSON may span lines), or a line
    ``report {...}`` (the JSON on that line; alone, or in a ``bash`` block); DONE alone on
    another line of the reply ends the episode once it is handed over. Otherwise:

    A fenced block wins over prose, whatever its language tag; a block holding only
    DONE is the end. Without a block: DONE alone on a line, or closing the reply after
    a sentence ("Fixed. DONE"), is the end; an inline `command` on its own line is a
    command; a bare one-line reply is taken as the command itself (models often send
    just that); prose over several lines is neither.
    """
    text = reply.strip()
    found = _report_in(text)
    if found is not None:
        report, rest = found
        lines = _FENCE_MARK.sub("", rest).splitlines()
        return Reply(report=report, done=any(_is_done(line) for line in lines if line.strip()))
    return _command_reply(text)


def _report_in(text: str) -> tuple[str, str] | None:
    """The report's JSON text and the reply without it; a ```report block wins over a line."""
    for block in _FENCE.finditer(text):
        if block.group(1).lower() == REPORT_TAG and block.group(2).strip():
            return block.group(2).strip(), text[: block.start()] + "\n" + text[block.end() :]
    line = _REPORT_LINE.search(text)
    if line is not None:
        return line.group(1), text[: line.start()] + text[line.end() :]
    return None


def _command_reply(text: str) -> Reply:
    for _lang, body in _FENCE.findall(text):
        body = body.strip()
        if not body:
            continue
        if _is_done(body):
            return Reply(done=True)
        lines = [line for line in body.splitlines() if line.strip()]
        if lines and _is_done(lines[-1]):  # the command, then DONE in the same block
            body = "\n".join(lines[:-1])
        return Reply(command=body.removeprefix("$ ").strip() or None, done=not body.strip())
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return Reply()
    if any(_is_done(line) for line in lines) or _SENTENCE_THEN_DONE.search(text):
        return Reply(done=True)
    inline = _INLINE.search(text)
    if inline:
        return Reply(command=inline.group(1).strip())
    if len(lines) == 1:
        command = lines[0].strip().removeprefix("$ ").strip("`").strip()
        return Reply(command=command or None)
    prompted = [line.strip()[2:] for line in lines if line.strip().startswith("$ ")]
    if prompted:
        return Reply(command=prompted[0].strip())
    return Reply()


def command_of(reply: str) -> str | None:
    """The shell command in a reply, or None (done, or no command: see ``read_reply``)."""
    return read_reply(reply).command


def _content(message: dict[str, Any]) -> str:
    """A message's text: a string, or (some servers) a list of parts with text."""
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


NO_COMMAND_FEEDBACK = (
    f"[fixos: {NO_COMMAND}. Reply with one command in a ```bash block, or DONE alone when fixed.]"
)


def step_line(
    step: int,
    action: str | None,
    exit_code: int | None,
    *,
    done: bool,
    reward: float = 0.0,
    error: str | None = None,
) -> str:
    """One ``[STEP]`` line; reward is always a number (the verifier's running score where known,
    else 0.00) so the usual log parsers read every line."""
    return (
        f"[STEP] step={step} action={'null' if action is None else _flat(action)} "
        f"exit={'null' if exit_code is None else exit_code} reward={reward:.2f} "
        f"done={str(done).lower()} error={'null' if error is None else _flat(error)}"
    )


class LlmAgent:
    name = "llm"

    @classmethod
    def preflight(cls) -> None:
        _settings()

    def __init__(self, timeout: float = 120.0) -> None:
        self.base, self.model, self._key = _settings()
        self.timeout = timeout
        self.task_id = ""
        self.steps = 0
        self.tokens = {"prompt": 0, "completion": 0}
        self._log: Any = None
        self._reports = Handed()

    def _chat(self, messages: list[dict[str, str]]) -> tuple[str, dict[str, int]]:
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0}).encode()
        request = urllib.request.Request(
            f"{self.base}/chat/completions",
            data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._key}"},
        )
        for attempt in range(RETRIES + 1):
            try:
                data = self._post(request)
                return _content(data["choices"][0]["message"]), data.get("usage") or {}
            except (urllib.error.URLError, OSError, KeyError, IndexError, TypeError, ValueError) as exc:
                if attempt == RETRIES:
                    raise LlmError(f"chat endpoint {self.base} failed: {exc}") from None
                time.sleep(1.0 * (attempt + 1))
        raise AssertionError("unreachable")

    def _post(self, request: urllib.request.Request) -> Any:
        """The endpoint's JSON answer; a harness that is stopping does not wait for it."""
        stop = stop_event()
        if stop is None:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                return json.load(resp)
        answer: list[Any] = []

        def fetch() -> None:
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                    answer.append(json.load(resp))
            except Exception as exc:  # handed to the waiting thread
                answer.append(exc)

        helper = threading.Thread(target=fetch, name="llm-request", daemon=True)
        helper.start()
        while helper.is_alive():
            helper.join(0.2)
            check_stop()
        if isinstance(answer[0], Exception):
            raise answer[0]
        return answer[0]

    def _record(self, entry: dict[str, Any]) -> None:
        if self._log is not None:
            self._log.write(json.dumps(entry) + "\n")
            self._log.flush()

    def solve(self, task: Task, shell: Shell) -> None:
        self.task_id = task.scenario
        if task.workdir is not None:
            self._log = (task.workdir / "llm_trajectory.jsonl").open("w", encoding="utf-8")
        print(f"[START] task={task.scenario} env=fixos model={self.model}", flush=True)
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"{task.instruction.strip()}\n\nYou have {task.max_steps} commands."},
        ]
        try:
            for step in range(1, task.max_steps + 1):
                check_stop()
                reply, usage = self._chat(messages)
                self.tokens["prompt"] += int(usage.get("prompt_tokens", 0))
                self.tokens["completion"] += int(usage.get("completion_tokens", 0))
                said = read_reply(reply)
                entry: dict[str, Any] = {
                    "step": step,
                    "reply": reply,
                    "usage": usage,
                    "command": said.command,
                }
                messages.append({"role": "assistant", "content": reply})
                if said.report is not None:  # handed over, not run; the model is told what became of it
                    told = self._hand(said.report, entry)
                    self._record(entry)
                    print(
                        step_line(step, "report", None, done=said.done, error=entry.get("error")), flush=True
                    )
                    if said.done:
                        return
                    messages.append({"role": "user", "content": told})
                    continue
                if said.done:
                    print(step_line(step, "DONE", None, done=True), flush=True)
                    self._record(entry)
                    return
                if said.command is None:  # a step that says so, and the model is told
                    entry.update(error=NO_COMMAND)
                    self._record(entry)
                    print(step_line(step, None, None, done=False, error=NO_COMMAND), flush=True)
                    messages.append({"role": "user", "content": NO_COMMAND_FEEDBACK})
                    continue
                result = shell.run(said.command)
                self.steps = step
                output = result.output[-OUTPUT_CAP:]
                entry.update(output=result.output, exit_code=result.exit_code, duration=result.duration)
                self._record(entry)
                print(step_line(step, said.command, result.exit_code, done=False), flush=True)
                messages.append({"role": "user", "content": f"exit code {result.exit_code}\n{output}"})
        except LlmError as exc:
            print(step_line(self.steps + 1, None, None, done=True, error=str(exc)), flush=True)
            raise

    def _hand(self, text: str, entry: dict[str, Any]) -> str:
        entry["report"] = text
        try:
            return f"[fixos: {self._reports.take(text)}]"
        except ReportError as exc:
            entry["error"] = str(exc)
            return f"[fixos: {exc}. The last report that parsed is kept; send a corrected one.]"

    def report(self) -> str | None:
        """The report the model handed over: the last that parsed, else the last one given."""
        return self._reports.text

    def finish(self, verdict: Verdict) -> None:
        self._record({"tokens": self.tokens, "reward": verdict.reward})
        if self._log is not None:
            self._log.close()
        success = "true" if verdict.solved else "false"
        print(
            f"[END] success={success} steps={self.steps} score={verdict.reward:.2f} "
            f"rewards={verdict.reward:.2f}",
            flush=True,
        )
