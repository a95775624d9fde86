"""Baseline inference over the OpenEnv server: an LLM repairs FixOS hosts through the
official client, one shell command per step.

    fixos serve --port 8000 &
    API_BASE_URL=https://api.openai.com/v1 MODEL_NAME=gpt-4o-mini HF_TOKEN=... python inference.py

Settings (environment): ``API_BASE_URL``, ``MODEL_NAME``, ``HF_TOKEN`` (or ``OPENAI_API_KEY``)
as for the ``llm`` agent; ``FIXOS_URL`` (default http://127.0.0.1:8000), ``FIXOS_TASKS``
(comma-separated ids, default ``easy_1``; ``all`` for every task), ``FIXOS_SEED`` (default 1).
A reply holding a report (``fixos.agents.llm.read_reply``) goes to the server as a report
action, with DONE when the reply ends with it. It prints the same lines as the ``llm``
agent, with the server's per-step rewards::

    [START] task=easy_1 env=fixos model=gpt-4o-mini
    [STEP] step=1 action="service nginx status" exit=3 reward=0.30 done=false error=null
    [STEP] step=2 action="service nginx start" exit=0 reward=1.00 done=true error=null
    [END] success=true steps=2 score=1.00 rewards=0.30,1.00
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request

from fixos.agents.llm import (
    NO_COMMAND,
    NO_COMMAND_FEEDBACK,
    OUTPUT_CAP,
    SYSTEM_PROMPT,
    LlmAgent,
    LlmError,
    read_reply,
    step_line,
)
from fixos.server import FixOSAction, FixOSEnv
from fixos.server.models import DONE_COMMAND

DEFAULT_URL = "http://127.0.0.1:8000"


def run_task(env, model: LlmAgent, task_id: str, seed: int) -> float:
    """One episode; returns the verifier's final score."""
    print(f"[START] task={task_id} env=fixos model={model.model}", flush=True)
    result = env.reset(task_id=task_id, seed=seed)
    obs = result.observation
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"{obs.instruction.strip()}\n\nYou have {obs.remaining_steps} commands."},
    ]
    rewards: list[float] = []
    steps = 0
    turns = 0  # replies read, commands or not: a model that never sends one still ends
    budget = obs.remaining_steps
    while not result.done and turns < budget:
        turns += 1
        try:
            reply, _ = model._chat(messages)
        except LlmError as exc:
            result = env.step(FixOSAction(command=DONE_COMMAND))
            reward = result.reward or 0.0
            rewards.append(reward)
            print(step_line(steps + 1, "DONE", None, done=True, reward=reward, error=str(exc)), flush=True)
            obs = result.observation
            break
        said = read_reply(reply)
        messages.append({"role": "assistant", "content": reply})
        if said.report is not None:  # handed to the server (kept, graded at the end), nothing runs
            result = env.step(FixOSAction(report=said.report, command=DONE_COMMAND if said.done else None))
            obs = result.observation
            rewards.append(result.reward or 0.0)
            told = obs.report_error or obs.command_output
            line = step_line(
                steps + 1, "report", None, done=result.done, reward=rewards[-1], error=obs.report_error
            )
            print(line, flush=True)
            messages.append({"role": "user", "content": told})
            continue
        if said.command is None and not said.done:  # a step that says so; the host is not touched
            last = rewards[-1] if rewards else 0.0
            print(step_line(steps + 1, None, None, done=False, reward=last, error=NO_COMMAND), flush=True)
            messages.append({"role": "user", "content": NO_COMMAND_FEEDBACK})
            continue
        result = env.step(FixOSAction(command=DONE_COMMAND if said.done else said.command))
        obs = result.observation
        reward = result.reward or 0.0
        rewards.append(reward)
        if said.done:
            print(step_line(steps + 1, "DONE", None, done=True, reward=reward), flush=True)
            break
        steps += 1
        print(step_line(steps, said.command, obs.exit_code, done=result.done, reward=reward), flush=True)
        messages.append(
            {"role": "user", "content": f"exit code {obs.exit_code}\n{obs.command_output[-OUTPUT_CAP:]}"}
        )
    if not result.done:  # the replies ran out of turns: end the episode for its final score
        result = env.step(FixOSAction(command=DONE_COMMAND))
        obs = result.observation
    score = obs.task_score
    print(
        f"[END] success={str(obs.is_success_step).lower()} steps={steps} score={score:.2f} "
        f"rewards={','.join(f'{r:.2f}' for r in rewards)}",
        flush=True,
    )
    return score


def _tasks(url: str) -> list[str]:
    wanted = os.environ.get("FIXOS_TASKS", "easy_1")
    if wanted != "all":
        return [t for t in wanted.split(",") if t]
    with urllib.request.urlopen(f"{url}/tasks", timeout=30) as resp:
        return [t["id"] for t in json.load(resp)]


def main() -> int:
    try:
        model = LlmAgent()
    except LlmError as exc:
        print(f"inference: {exc}", file=sys.stderr)
        return 1
    url = os.environ.get("FIXOS_URL", DEFAULT_URL).rstrip("/")
    seed = int(os.environ.get("FIXOS_SEED", "1"))
    with FixOSEnv(base_url=url).sync() as env:
        for task_id in _tasks(url):
            run_task(env, model, task_id, seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
