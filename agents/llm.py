"""An agent driven by any OpenAI-compatible chat-completions endpoint.

Settings come from the environment, as in the FixOS baseline ``inference.py``:
``API_BASE_URL`` (e.g. ``https://api.openai.com/v1``), ``MODEL_NAME``, and
``HF_TOKEN`` or ``OPENAI_API_KEY``. One shell command per step; its output is
fed back (capped); ``DONE`` ends the episode. It prints one machine-parsable line
per event::

    [START] task=easy_1 env=fixos model=gpt-4o-mini
    [STEP] step=1 action="service nginx status" exit=3 reward=null done=false error=null
    [END] success=true steps=2 score=1.00 rewards=1.00

and saves the whole conversation with token counts to ``llm_trajectory.jsonl``.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from typing import Any

from fixos.agents.base import Task
from fixos.core.errors import FixOSError
from fixos.core.models import Verdict
from fixos.shells.base import Shell

SYSTEM_PROMPT = """You are an experienced site reliability engineer, logged in as root on a \
broken Debian server (sysvinit: use `service NAME start|stop|status`). Work like a careful \
engineer: look before you change, make the smallest repair, keep data and logs, never \
replace a service's configuration with a stub.

Reply with exactly one shell command per turn, in a ```bash code block. Commands run \
non-interactively with a timeout (no editors, no pagers; use sed, tee, cat <<EOF). \
When the problem is fixed, reply with the single word DONE."""
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


def command_of(reply: str) -> str | None:
    """The shell command in a reply, or None when the model says it is done."""
    block = re.search(r"```(?:bash|sh|shell)?\s*\n(.*?)```", reply, re.DOTALL)
    if block:
        return block.group(1).strip() or None
    text = reply.strip()
    if not text or text.upper().rstrip(".!") == "DONE":
        return None
    return text.splitlines()[0].strip().strip("`") or None


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

    def _chat(self, messages: list[dict[str, str]]) -> tuple[str, dict[str, int]]:
        body = json.dumps({"model": self.model, "messages": messages, "temperature": 0}).encode()
        request = urllib.request.Request(
            f"{self.base}/chat/completions",
            data=body,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self._key}"},
        )
        for attempt in range(RETRIES + 1):
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                    data = json.load(resp)
                return data["choices"][0]["message"]["content"] or "", data.get("usage") or {}
            except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError) as exc:
                if attempt == RETRIES:
                    raise LlmError(f"chat endpoint {self.base} failed: {exc}") from None
                time.sleep(1.0 * (attempt + 1))
        raise AssertionError("unreachable")

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
                reply, usage = self._chat(messages)
                self.tokens["prompt"] += int(usage.get("prompt_tokens", 0))
                self.tokens["completion"] += int(usage.get("completion_tokens", 0))
                command = command_of(reply)
                entry: dict[str, Any] = {"step": step, "reply": reply, "usage": usage, "command": command}
                if command is None:
                    print(
                        f'[STEP] step={step} action="DONE" exit=null reward=null done=true error=null',
                        flush=True,
                    )
                    self._record(entry)
                    return
                result = shell.run(command)
                self.steps = step
                output = result.output[-OUTPUT_CAP:]
                entry.update(output=result.output, exit_code=result.exit_code, duration=result.duration)
                self._record(entry)
                print(
                    f"[STEP] step={step} action={_flat(command)} exit={result.exit_code} "
                    "reward=null done=false error=null",
                    flush=True,
                )
                messages.append({"role": "assistant", "content": reply})
                messages.append({"role": "user", "content": f"exit code {result.exit_code}\n{output}"})
        except LlmError as exc:
            print(
                f"[STEP] step={self.steps + 1} action=null exit=null reward=null done=true "
                f"error={_flat(str(exc))}",
                flush=True,
            )
            raise

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
