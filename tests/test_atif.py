"""Episodes as ATIF trajectories and a run as a Harbor job, built from records alone. Fast:
no container, no Harbor. Harbor's own models read the same files in ``make harbor-check``
(``scripts/harbor_trajectories.py``): Harbor needs Python >= 3.12, which ``make test``
does not."""

from __future__ import annotations

import json
from pathlib import Path

from fixos.core.models import CheckResult, Step, Verdict
from fixos.records.atif import ATIF_VERSION, TRAJECTORY, trajectory
from fixos.records.failures import EpisodeStatus, Failure, FailureKind
from fixos.records.harbor_job import export_run
from fixos.records.models import EpisodeRecord, StepLine, Timings
from fixos.records.rundir import RunDir

RUN = "20261204-000000-test"


def record(agent: str = "baseline", reward: float | None = 0.5) -> EpisodeRecord:
    invalid = reward is None
    return EpisodeRecord(
        run_id=RUN,
        episode_id=f"easy_1-s1-{agent}",
        scenario="easy_1",
        difficulty="easy",
        seed=1,
        agent=agent,
        status=EpisodeStatus.invalid if invalid else EpisodeStatus.scored,
        reward=reward,
        solved=reward == 1.0,
        steps=0 if invalid else 2,
        timings=Timings(reset=1.5, agent=2.0, verify=0.5),
        verdict=None
        if invalid
        else Verdict(reward, [CheckResult("site_up", "http", False, True, 1.0, "refused")]),
        failure=Failure(kind=FailureKind.boot_failed, detail="no boot in 60 s") if invalid else None,
    )


STEPS = [
    Step(0, "systemctl status nginx", "nginx is not running \u2717\n", 3, 0.04, 1_700_000_000.0),
    Step(1, "sleep 100", "", 124, 40.0, 1_700_000_001.5, timed_out=True),
]


def test_each_command_is_a_tool_call_with_its_output_observed():
    data = trajectory(record(), [StepLine.of(s) for s in STEPS], "The site is down.", "1.2.3")
    assert data["schema_version"] == ATIF_VERSION == "ATIF-v1.8"
    assert data["agent"]["name"] == "baseline" and data["agent"]["version"] == "1.2.3"
    user, first, second = data["steps"]
    assert user == {
        "step_id": 1,
        "source": "user",
        "message": "The site is down.",
        "timestamp": "2023-11-14T22:13:20+00:00",
    }
    assert [s["step_id"] for s in data["steps"]] == [1, 2, 3]  # Harbor wants 1, 2, ... in order
    call = first["tool_calls"][0]
    assert call == {
        "tool_call_id": "call_0",
        "function_name": "bash",
        "arguments": {"command": STEPS[0].command},
    }
    assert first["observation"]["results"] == [{"source_call_id": "call_0", "content": STEPS[0].output}]
    assert first["extra"] == {"exit_code": 3, "duration": 0.04, "timed_out": False}
    assert second["extra"]["timed_out"] is True and second["timestamp"] == "2023-11-14T22:13:21.500000+00:00"
    final = data["final_metrics"]
    assert (
        final["total_steps"] == 3 and final["extra"]["reward"] == 0.5 and final["extra"]["status"] == "scored"
    )
    json.dumps(data)  # plain JSON all through


def test_an_episode_without_commands_still_has_a_step():
    data = trajectory(record(reward=None), [])
    assert [s["source"] for s in data["steps"]] == ["user"]  # ATIF wants at least one step
    assert "easy_1" in data["steps"][0]["message"]
    assert data["final_metrics"]["extra"]["failure"] == "boot_failed: no boot in 60 s"


def test_the_episode_directory_gets_its_trajectory(tmp_path: Path):
    run = RunDir(tmp_path, RUN)
    directory = run.write_episode(record(), STEPS)
    written = json.loads((directory / TRAJECTORY).read_text())
    assert [s["tool_calls"][0]["arguments"]["command"] for s in written["steps"][1:]] == [
        s.command for s in STEPS
    ]


def test_a_run_exported_as_a_harbor_job(tmp_path: Path):
    run = RunDir(tmp_path / "results", RUN)
    run.write_episode(record(), STEPS)
    run.write_episode(record("oracle", None), [])
    job = export_run(run, tmp_path / "jobs", {"easy_1": "The site is down."})
    assert job == tmp_path / "jobs" / RUN
    trial = job / "easy_1-s1-baseline"
    assert (trial / "verifier" / "reward.txt").read_text() == "0.5\n"
    assert json.loads((trial / "verifier" / "reward.json").read_text()) == {"reward": 0.5}
    assert (
        json.loads((trial / "agent" / TRAJECTORY).read_text())["steps"][0]["message"] == "The site is down."
    )
    result = json.loads((trial / "result.json").read_text())
    assert result["verifier_result"] == {"rewards": {"reward": 0.5}} and result["source"] == "fixos"
    # the agent's phase starts at its first command; reset before it, the verifier after
    assert result["agent_execution"]["started_at"] == "2023-11-14T22:13:20+00:00"
    assert (
        result["environment_setup"]["started_at"]
        == result["started_at"]
        == "2023-11-14T22:13:18.500000+00:00"
    )
    assert result["verifier"]["finished_at"] == result["finished_at"] == "2023-11-14T22:13:22.500000+00:00"
    invalid = json.loads((job / "easy_1-s1-oracle" / "result.json").read_text())
    assert invalid["verifier_result"] is None and invalid["exception_info"]["exception_type"] == "boot_failed"
    assert not (job / "easy_1-s1-oracle" / "verifier").exists()
    stats = json.loads((job / "result.json").read_text())["stats"]
    assert stats["n_completed_trials"] == 2 and stats["n_errored_trials"] == 1
    assert stats["evals"]["baseline__fixos"]["metrics"] == [{"mean": 0.5}]
    assert stats["evals"]["oracle__fixos"]["exception_stats"] == {"boot_failed": ["easy_1-s1-oracle"]}
    assert stats["evals"]["oracle__fixos"]["metrics"] == []  # Harbor's mean leaves out a trial with no reward


def test_an_export_is_the_same_bytes_twice(tmp_path: Path):
    run = RunDir(tmp_path / "results", RUN)
    run.write_episode(record(), STEPS)
    first, second = (export_run(run, tmp_path / "jobs") for _ in range(2))
    assert first == second
    before = {p: p.read_bytes() for p in first.rglob("*") if p.is_file()}
    export_run(run, tmp_path / "jobs")
    assert before == {p: p.read_bytes() for p in first.rglob("*") if p.is_file()}
