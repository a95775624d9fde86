"""A FixOS run written as a Harbor job (``fixos export-run RUN OUT``): the directory layout
Harbor's own ``harbor run`` leaves and ``harbor view`` reads, so Harbor's viewer, and tools
that read Harbor's jobs, open FixOS episodes as trials.

    OUT/<run-id>/                 the job: config.json (JobConfig), result.json (JobResult)
      <episode-id>/               one trial per episode: config.json (TrialConfig),
        result.json               result.json (TrialResult: reward, timings, exception)
        agent/trajectory.json     the episode's ATIF trajectory (``records.atif``)
        verifier/reward.txt       the reward alone, as Harbor's verifiers write it
        verifier/reward.json      {"reward": x}, as FixOS's exported tasks write it
        verifier/checks.json      every check with its evidence

Plain JSON shaped after Harbor 0.26.0's models (``harbor.models.job``, ``.trial``), which
validate it from Harbor's own environment (``scripts/harbor_validate.py``): FixOS runs on
Python 3.11, Harbor needs 3.12. Harbor's ids are UUIDs: these are derived from the run and
episode ids, so exporting a run twice gives the same bytes.

Times: a record keeps seconds per phase, not when each began. The agent's phase starts at
its first command (``started_at``); with no command, the episode is taken to have ended
when its transcript was written. The phases before and after are laid out from there.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from .atif import fixos_version, iso, write_trajectory
from .models import EpisodeRecord, StepLine
from .rundir import TRANSCRIPT, RunDir, read_reward, read_transcript

DATASET = "fixos"
"""the trials' ``source``: Harbor groups a job's metrics by agent and dataset."""
NAMESPACE = uuid.UUID("6f1c0a52-5b0e-4f58-9a51-0e4d2c6b7a10")
"""FixOS's namespace for the UUIDs Harbor's files want (uuid5 of run and episode ids)."""


def _uuid(*parts: str) -> str:
    return str(uuid.uuid5(NAMESPACE, "/".join(parts)))


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _span(start: datetime, seconds: float) -> dict[str, str]:
    return {"started_at": start.isoformat(), "finished_at": (start + timedelta(seconds=seconds)).isoformat()}


def _timings(record: EpisodeRecord, steps: list[StepLine], directory: Path) -> dict[str, Any]:
    """TrialResult's timing fields: reset as ``environment_setup``, then the agent, then the
    verifier, anchored as the module's docstring says."""
    t = record.timings
    if steps:
        agent_start = datetime.fromtimestamp(steps[0].started_at, UTC)
    else:
        written = directory / TRANSCRIPT
        end = datetime.fromtimestamp(written.stat().st_mtime if written.exists() else 0, UTC)
        agent_start = end - timedelta(seconds=t.agent + t.verify)
    start = agent_start - timedelta(seconds=t.reset)
    verify_start = agent_start + timedelta(seconds=t.agent)
    return {
        "started_at": start.isoformat(),
        "finished_at": (verify_start + timedelta(seconds=t.verify)).isoformat(),
        "environment_setup": _span(start, t.reset),
        "agent_execution": _span(agent_start, t.agent),
        "verifier": _span(verify_start, t.verify),
    }


def trial_config(record: EpisodeRecord, job_dir: Path) -> dict[str, Any]:
    return {
        "task": {"path": record.scenario, "source": DATASET},
        "trial_name": record.episode_id,
        "trials_dir": str(job_dir),
        "agent": {"name": record.agent},
        "job_id": _uuid(record.run_id),
    }


def trial_result(
    record: EpisodeRecord, steps: list[StepLine], directory: Path, job_dir: Path
) -> dict[str, Any]:
    """TrialResult: an invalid episode has no reward and Harbor's ``exception_info`` names
    its failure kind; a scored one the verifier's reward."""
    result: dict[str, Any] = {
        "id": _uuid(record.run_id, record.episode_id),
        "task_name": record.scenario,
        "trial_name": record.episode_id,
        "trial_uri": (job_dir / record.episode_id).resolve().as_uri(),
        "task_id": {"path": record.scenario},
        "source": DATASET,
        # Harbor hashes a task's files; a FixOS scenario is named by its id and seed instead.
        "task_checksum": f"{record.scenario}-s{record.seed}",
        "config": trial_config(record, job_dir),
        "agent_info": {"name": record.agent, "version": fixos_version()},
        "verifier_result": None if record.reward is None else {"rewards": {"reward": record.reward}},
        **_timings(record, steps, directory),
    }
    if record.failure is not None and record.reward is None:
        result["exception_info"] = {
            "exception_type": record.failure.kind.value,
            "exception_message": record.failure.detail,
            "exception_traceback": "",
            "occurred_at": result["finished_at"],
        }
    return result


def _stats(results: list[dict[str, Any]]) -> dict[str, Any]:
    """JobStats as Harbor's ``JobStats.increment`` counts it, per agent over the dataset."""
    evals: dict[str, dict[str, Any]] = {}
    errored = 0
    for r in results:
        ev = evals.setdefault(
            f"{r['agent_info']['name']}__{DATASET}",
            {"n_trials": 0, "n_errors": 0, "metrics": [], "reward_stats": {}, "exception_stats": {}},
        )
        if r["verifier_result"] is not None:
            ev["n_trials"] += 1
            reward = r["verifier_result"]["rewards"]["reward"]
            ev["reward_stats"].setdefault("reward", {}).setdefault(str(reward), []).append(r["trial_name"])
        if "exception_info" in r:
            ev["n_errors"] += 1
            errored += 1
            kind = r["exception_info"]["exception_type"]
            ev["exception_stats"].setdefault(kind, []).append(r["trial_name"])
    # Harbor's default metric, the mean reward, is over the trials with a verifier result, as
    # Harbor's job computes it (so an invalid episode is left out, as FixOS's summary does).
    for ev in evals.values():
        rewards = [float(v) for v, names in ev["reward_stats"].get("reward", {}).items() for _ in names]
        ev["metrics"] = [{"mean": sum(rewards) / len(rewards)}] if rewards else []
    return {"n_completed_trials": len(results), "n_errored_trials": errored, "evals": evals}


def _verifier_files(trial: Path, record: EpisodeRecord, directory: Path) -> None:
    if record.reward is None:
        return
    verifier = trial / "verifier"
    verifier.mkdir(parents=True, exist_ok=True)
    (verifier / "reward.txt").write_text(f"{record.reward}\n", encoding="utf-8")
    _write(verifier / "reward.json", {"reward": record.reward})
    saved = read_reward(directory)
    if saved is not None:
        _write(verifier / "checks.json", [c.model_dump() for c in saved.checks])


def export_run(run: RunDir, out: Path, instructions: Mapping[str, str] | None = None) -> Path:
    """Write ``run`` as the Harbor job ``out/<run-id>``; its path. ``instructions`` maps a
    scenario id to its text, for each trajectory's first step."""
    records = run.records()
    job_dir = out / run.run_id
    results = []
    for record in records:
        directory = run.path / record.episode_id
        steps = read_transcript(directory)
        trial = job_dir / record.episode_id
        (trial / "agent").mkdir(parents=True, exist_ok=True)
        write_trajectory(trial / "agent", record, steps, (instructions or {}).get(record.scenario))
        _verifier_files(trial, record, directory)
        result = trial_result(record, steps, directory, job_dir)
        _write(trial / "config.json", trial_config(record, job_dir))
        _write(trial / "result.json", result)
        results.append(result)
    started = min((r["started_at"] for r in results), default=iso(0))
    finished = max((r["finished_at"] for r in results), default=started)
    agents = sorted({r.agent for r in records})
    _write(
        job_dir / "config.json",
        {
            "job_name": run.run_id,
            "jobs_dir": str(out),
            "agents": [{"name": a} for a in agents],
            "tasks": [{"path": s, "source": DATASET} for s in sorted({r.scenario for r in records})],
        },
    )
    _write(
        job_dir / "result.json",
        {
            "id": _uuid(run.run_id),
            "started_at": started,
            "updated_at": finished,
            "finished_at": finished,
            "n_total_trials": len(results),
            "stats": _stats(results),
        },
    )
    return job_dir
