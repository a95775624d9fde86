"""fixos.training.trl against TRL's environment_factory contract, without TRL or torch:
no-argument construction, ``reset(**row)`` returning the instruction, ``run`` and ``report``
as the only tools (their schemas from transformers' own ``get_json_schema``, which TRL renders
tools with), the verifier's score from ``get_reward`` with the report's grade beside it,
and hosts freed on the next reset, when judged and when the instance is dropped.
``make train-smoke`` (scripts/train_smoke.py) drives the same class through TRL itself."""

from __future__ import annotations

import gc
import inspect
import json
import shlex

import pytest
from helpers import labelled, wait_for
from transformers.utils import get_json_schema  # the dev extra's; it imports without torch

from fixos.diagnosis.truth import truth_report, truths
from fixos.injector.recipes import CAUSES
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.solution import render
from fixos.scenarios.worlds import split
from fixos.stack.leftovers import remove_labelled
from fixos.training.trl import FixOSToolEnv, close, reward_func

CATALOG = load_catalog()


def tool_schema(func) -> dict:
    """The ``function`` part of the schema TRL puts in the prompt for a tool: transformers'
    ``get_json_schema``, which raises on a parameter without a type hint or an ``Args:`` line."""
    return get_json_schema(func)["function"]


def tools_trl_sees(env: object) -> list[str]:
    """TRL's rule: every public bound method but reset and get_reward is a tool."""
    return [
        name
        for name, _ in inspect.getmembers(env, predicate=inspect.ismethod)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


def test_the_contract_without_trl(monkeypatch):
    monkeypatch.setenv("FIXOS_TASK", "easy_2,hard_1")
    monkeypatch.setenv("FIXOS_SEED", "5")
    monkeypatch.setenv("FIXOS_TRANSPORT", "ssh")
    env = FixOSToolEnv()  # no argument, no container
    assert env._transport == "ssh" and env._default_seed == 5 and env.live_episode is None
    assert {env._draw_task() for _ in range(40)} == {"easy_2", "hard_1"}
    monkeypatch.delenv("FIXOS_TASK")
    assert env._draw_task() in CATALOG and FixOSToolEnv()._draw_task() in CATALOG
    tools = tools_trl_sees(env)
    assert tools == ["report", "run"], "a public method would be offered to the model as a tool"
    schemas = {name: tool_schema(getattr(env, name)) for name in tools}
    schema = schemas["run"]
    assert schema["name"] == "run" and schema["description"].startswith("Run a bash command")
    params = schema["parameters"]
    assert params["required"] == ["command"] and list(params["properties"]) == ["command"]
    command = params["properties"]["command"]
    assert command["type"] == "string" and "bash command line" in command["description"]
    assert "exit code" in schema["return"]["description"]
    schema = schemas["report"]
    assert schema["name"] == "report" and schema["description"].startswith("Hand over your diagnosis")
    params = schema["parameters"]
    assert params["required"] == ["report"] and list(params["properties"]) == ["report"]
    assert params["properties"]["report"]["type"] == "string"
    described = params["properties"]["report"]["description"]
    assert '"findings"' in described and "KIND:TARGET" in described and all(c in described for c in CAUSES)
    assert env.run("true").startswith("[fixos:"), "no episode yet: a message, not a crash"
    assert env.report('{"healthy": true}').startswith("[fixos: the episode is over")
    assert inspect.signature(env.get_reward).parameters == {}
    assert env.get_reward() == 0.0 and reward_func([env]) == [0.0]
    close(env)  # nothing held: a no-op

    class Configured(FixOSToolEnv):
        default_task, default_seed, output_chars = "hard_1", 7, 100

    configured = Configured()
    settings = (configured._default_task, configured._default_seed, configured._output_chars)
    assert settings == ("hard_1", 7, 100)


def run_ids(env: FixOSToolEnv) -> str:
    assert env.live_episode is not None
    return env.live_episode.run_id


@pytest.mark.live
def test_episodes_through_the_contract(client, images):
    made: list[str] = []
    env = FixOSToolEnv()
    try:
        assert env.reset(task_id="easy_1", seed=1) == CATALOG["easy_1"].instruction
        first = run_ids(env)
        made.append(first)
        assert labelled(client, first)
        out = env.run(command="service nginx status")
        assert out.endswith("[exit code: 3]") and "not running" in out
        assert env.run("echo hi; exit 4") == "hi\n[exit code: 4]"

        # the next row (extra dataset columns are ignored) frees the first episode's hosts
        env.reset(task_id="easy_1", seed=2, prompt=[{"role": "user", "content": "fix it"}])
        made.append(run_ids(env))
        assert labelled(client, first) == []
        assert env.get_reward() == 0.0 and env.reward == 0.0, "nothing repaired: the verifier says 0"
        assert labelled(client, made[-1]) == [], "a judged episode frees its hosts"
        assert env.run("true").startswith("[fixos:")

        assert env.verdict["diagnosis"]["source"] == "none" and env.verdict["diagnosis"]["score"] == 0.0

        env.reset(task_id="easy_1", seed=3)
        made.append(run_ids(env))
        faults = env.live_episode.faults
        oracle = render(CATALOG["easy_1"].solution, faults)
        assert env.run(f"bash -euo pipefail -c {shlex.quote(oracle)}").endswith("[exit code: 0]")
        # a report is a tool call: kept (the last that parses), graded only once judged
        said = env.report('{"healthy": false, "findings": [{"host": "web", "cause": "config_error"}]}')
        assert said.startswith("[fixos: report: findings.0.component:") and "\n" not in said
        assert env.report(json.dumps(truth_report(truths(faults)))).startswith(
            "[fixos: report kept (1 finding"
        )
        assert env.report("not json").startswith("[fixos: report: not JSON"), "refused; the good one stays"
        assert reward_func([env]) == [1.0] and env.get_reward() == 1.0
        assert env.verdict["reward"] == 1.0 and env.steps == 1, "a report is not a command"
        diagnosis = env.verdict["diagnosis"]
        assert (diagnosis["score"], diagnosis["source"], diagnosis["error"]) == (1.0, "agent", None)
        assert diagnosis["per_fault"] == [
            {"type": "service_stopped", "host": "web", "finding": 0, "credit": 1.0}
        ]
        assert env.report('{"healthy": true}').startswith("[fixos: the episode is over")

        # an instance the trainer drops frees its hosts with it
        env.reset(task_id="easy_1", seed=4)
        last = run_ids(env)
        made.append(last)
        assert labelled(client, last)
        del env
        gc.collect()
        wait_for(lambda: labelled(client, last) == [], timeout=30)
    finally:
        for run_id in made:
            remove_labelled(client, run_id=run_id)


@pytest.mark.live
def test_a_row_with_a_level_gets_a_generated_train_world_and_its_curriculum_is_recorded(client, images):
    env = FixOSToolEnv()
    made: list[str] = []
    try:
        instruction = env.reset(level="auto", seed=1)
        made.append(run_ids(env))
        scenario = env.live_episode.scenario
        assert scenario.id.startswith("gen:1:") and split(scenario.id) == "train"
        assert instruction == scenario.instruction
        oracle = render(scenario.solution, env.live_episode.faults)
        assert env.run(f"bash -euo pipefail -c {shlex.quote(oracle)}").endswith("[exit code: 0]")
        assert env.get_reward() == 1.0
        assert env.verdict["curriculum"] == {"task_id": scenario.id, "level": 1, "why": "start", "rate": None}
    finally:
        for run_id in made:
            remove_labelled(client, run_id=run_id)


@pytest.mark.live
def test_a_row_with_a_task_level_is_rewarded_with_its_report_and_never_for_touching(client, images):
    env = FixOSToolEnv()
    made: list[str] = []
    try:
        said = env.reset(task_id="easy_1", seed=1, task="detect")
        made.append(run_ids(env))
        assert said.startswith(CATALOG["easy_1"].instruction.rstrip()) and "do NOT change anything" in said
        env.run("service nginx status")
        assert env.report('{"healthy": false, "findings": []}').startswith("[fixos: report kept")
        assert env.get_reward() == 1.0 and env.verdict["task"] == "detect" and env.verdict["reward"] == 1.0

        env.reset(task_id="easy_1", seed=1, task="detect")
        made.append(run_ids(env))
        env.run("service nginx start")  # a repair, where the task said to change nothing
        env.report('{"healthy": false, "findings": []}')
        assert env.get_reward() == 0.0 and env.verdict["diagnosis"]["score"] == 1.0
    finally:
        for run_id in made:
            remove_labelled(client, run_id=run_id)
