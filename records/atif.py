"""An episode's transcript as an ATIF trajectory (the Agent Trajectory Interchange Format of
Harbor, https://github.com/laude-institute/harbor, ``docs/rfcs/0001-trajectory-format.md``),
the format Harbor's viewer, SREGym's converter and trainers read.

Written as plain JSON, not through Harbor's models: Harbor needs Python >= 3.12 and FixOS
runs on 3.11, so its pydantic models (``harbor.models.trajectories.Trajectory``) validate
what this writes from Harbor's own environment instead (``scripts/harbor_validate.py``,
run by ``make harbor-check``), never a copy of them here.

Shape: step 1 is the user's report (the scenario's instruction), then one agent step per
command, each a ``bash`` tool call with its output as the observation. FixOS does not know
whether an agent's command came from a model, so ``llm_call_count`` is left out (ATIF's
"not tracked"), and the reward, timings and exit codes go in the ``extra`` fields ATIF
leaves for producers.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from .models import EpisodeRecord, StepLine

ATIF_VERSION = "ATIF-v1.8"
"""the newest version Harbor 0.26.0's ``Trajectory.schema_version`` accepts (its default)."""
TOOL = "bash"
TOOL_DEFINITION = {
    "type": "function",
    "function": {
        "name": TOOL,
        "description": "Run a shell command on the broken host (the agent's login session).",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}
"""OpenAI's function-calling schema, as ATIF's ``agent.tool_definitions`` asks."""
TRAJECTORY = "trajectory.json"


@functools.cache
def fixos_version() -> str:
    """The installed FixOS's version, for ``agent.version`` (asked once: it reads metadata)."""
    try:
        return metadata.version("fixos")
    except metadata.PackageNotFoundError:
        return "unknown"


def iso(unix: float) -> str:
    """ATIF's ISO 8601 timestamp of a Unix time, in UTC."""
    return datetime.fromtimestamp(unix, UTC).isoformat()


def call_id(step: StepLine) -> str:
    return f"call_{step.index}"


def _command_step(step_id: int, step: StepLine) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "timestamp": iso(step.started_at),
        "source": "agent",
        "message": "",
        "tool_calls": [
            {"tool_call_id": call_id(step), "function_name": TOOL, "arguments": {"command": step.command}}
        ],
        "observation": {"results": [{"source_call_id": call_id(step), "content": step.output}]},
        "extra": {"exit_code": step.exit_code, "duration": step.duration, "timed_out": step.timed_out},
    }


def default_instruction(record: EpisodeRecord) -> str:
    """What step 1 says when the scenario's own words are not at hand (the run directory
    records the scenario's id, not its text)."""
    return f"FixOS scenario {record.scenario}, seed {record.seed}: repair the broken host."


def trajectory(
    record: EpisodeRecord, steps: Iterable[StepLine], instruction: str | None = None, version: str = "unknown"
) -> dict[str, Any]:
    """The ATIF trajectory of one episode: ``record`` (episodes.jsonl's line) and its
    transcript; ``instruction`` is the scenario's text for the user's step; ``version`` is
    FixOS's, for ``agent.version``."""
    lines = list(steps)
    first = lines[0].started_at if lines else None
    opening: dict[str, Any] = {
        "step_id": 1,
        "source": "user",
        "message": instruction or default_instruction(record),
    }
    if first is not None:  # the task is handed over as the agent starts
        opening["timestamp"] = iso(first)
    extra: dict[str, Any] = {
        "reward": record.reward,
        "solved": record.solved,
        "status": record.status.value,
        "timings": record.timings.model_dump(),
    }
    if record.failure is not None:
        extra["failure"] = record.error
    if record.diagnosis is not None:
        extra["diagnosis"] = record.diagnosis.score
    return {
        "schema_version": ATIF_VERSION,
        "session_id": f"{record.run_id}/{record.episode_id}",
        "agent": {
            "name": record.agent,
            "version": version,
            "tool_definitions": [TOOL_DEFINITION],
            "extra": {"harness": "fixos"},
        },
        "steps": [opening] + [_command_step(n, s) for n, s in enumerate(lines, start=2)],
        "notes": (
            f"FixOS episode {record.episode_id} (scenario {record.scenario}, difficulty "
            f"{record.difficulty}, seed {record.seed}, task {record.task}): one agent step per shell "
            "command; the verifier's reward is in final_metrics.extra."
        ),
        "final_metrics": {"total_steps": len(lines) + 1, "extra": extra},
        "extra": {
            "run_id": record.run_id,
            "episode_id": record.episode_id,
            "scenario": record.scenario,
            "seed": record.seed,
            "families": record.families,
        },
    }


def write_trajectory(
    directory: Path, record: EpisodeRecord, steps: Iterable[StepLine], instruction: str | None = None
) -> Path:
    """``directory/trajectory.json``: the episode's trajectory, beside its transcript."""
    path = directory / TRAJECTORY
    data = trajectory(record, steps, instruction, fixos_version())
    # compact: indented, it took three times the transcript's bytes, and every episode has one
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    return path
