"""FixOS's trajectories and run exports read by Harbor's own models (for ``make harbor-check``).

A small run is written the way a bench writes it (``RunDir.write_episode``: a scored
episode whose output holds what JSON and terminals trip on, and an invalid one with no
command), exported as a Harbor job (``records.harbor_job``), and handed to
``scripts/harbor_validate.py`` in Harbor's interpreter: Harbor's ``Trajectory``,
``TrialResult``, ``JobResult`` and its viewer's scanner must accept every file. Then
Harbor's viewer itself (``harbor view``, its web server on a free port of 127.0.0.1) must
list each exported job with all its trials and serve each trial's trajectory through its
own API. No engine and no container: it takes a few seconds.

    .venv/bin/python scripts/harbor_trajectories.py [RUN_DIR ...]

checks the sample run, and any real run directories named, with the Harbor of
``.venv/harbor`` (``make harbor-check`` installs it).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from harbor_env import VENV

from fixos.core.models import CheckResult, Step, Verdict
from fixos.records.failures import EpisodeStatus, Failure, FailureKind
from fixos.records.harbor_job import export_run
from fixos.records.models import EpisodeRecord, Timings
from fixos.records.rundir import RunDir

VALIDATOR = Path(__file__).with_name("harbor_validate.py")
SAMPLE_RUN = "20261204-000000-atif"


def sample_run(root: Path) -> RunDir:
    run = RunDir(root, SAMPLE_RUN)
    common = {"run_id": SAMPLE_RUN, "difficulty": "easy", "seed": 1, "families": ["service"]}
    scored = EpisodeRecord(
        episode_id="easy_1-s1-baseline",
        scenario="easy_1",
        agent="baseline",
        status=EpisodeStatus.scored,
        reward=0.5,
        solved=False,
        steps=2,
        timings=Timings(reset=1.5, agent=2.0, verify=0.5),
        verdict=Verdict(0.5, [CheckResult("site_up", "http", False, True, 1.0, "refused")]),
        **common,
    )
    tricky = "nginx is not running \u2717\n\x1b[31mred\x1b[0m \x00"  # escapes, colour, a NUL
    steps = [
        Step(0, "systemctl status nginx", tricky, 3, 0.04, 1.7e9),
        Step(1, "sleep 100", "", 124, 40.0, 1.7e9 + 1, timed_out=True),
    ]
    run.write_episode(scored, steps)
    invalid = EpisodeRecord(
        episode_id="easy_1-s1-oracle",
        scenario="easy_1",
        agent="oracle",
        status=EpisodeStatus.invalid,
        reward=None,
        solved=False,
        steps=0,
        timings=Timings(reset=60.0),
        failure=Failure(kind=FailureKind.boot_failed, detail="the host did not boot in 60 s"),
        **common,
    )
    run.write_episode(invalid, [])
    return run


def check(runs: list[Path], out: Path, venv: Path = VENV) -> tuple[bool, str]:
    """Every run in ``runs`` (the sample when empty) exported under ``out/jobs`` and read by
    Harbor's models; (all valid, Harbor's last line or why it could not run)."""
    python = venv / "bin" / "python"
    if not python.exists():
        return False, f"no Harbor environment at {venv}: `make harbor-check` installs it"
    dirs = [RunDir(p.parent, p.name) for p in runs] or [sample_run(out / "runs")]
    jobs = out / "jobs"
    for run in dirs:
        export_run(run, jobs)
    episode_trajectories = [str(p) for run in dirs for p in sorted(run.path.glob("*/trajectory.json"))]
    done = subprocess.run(
        [str(python), str(VALIDATOR), str(jobs), *episode_trajectories],
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = (done.stderr.strip() + "\n" + done.stdout.strip()).strip()
    if done.returncode != 0:
        return False, said
    viewed, seen = viewer_serves(jobs, dirs, venv)
    return viewed, f"{said}\n{seen}"


def viewer_serves(
    jobs: Path, runs: list[RunDir], venv: Path = VENV, timeout: float = 60.0
) -> tuple[bool, str]:
    """Harbor's own viewer (``harbor view JOBS``) lists every run as a job with all its
    episodes as trials, and serves each trial's trajectory (the sample's invalid episode has
    none); (all served, what it saw)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [str(venv / "bin" / "harbor"), "view", str(jobs), "--port", str(port), "--no-build"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                listed = {job["name"]: job for job in _get(f"{base}/jobs")["items"]}
                break
            except (OSError, urllib.error.URLError, ValueError):
                if server.poll() is not None or time.monotonic() > deadline:
                    return False, f"Harbor's viewer did not answer on port {port}"
                time.sleep(0.3)
        trajectories = 0
        for run in runs:
            job = listed.get(run.run_id)
            episodes = {r.episode_id for r in run.records()}
            if job is None or job["n_total_trials"] != len(episodes):
                return (
                    False,
                    f"Harbor's viewer lists {sorted(listed)}, not {run.run_id} with {len(episodes)} trial(s)",
                )
            trials = {t["name"] for t in _get(f"{base}/jobs/{run.run_id}/trials")["items"]}
            if trials != episodes:
                return (
                    False,
                    f"Harbor's viewer shows trials {sorted(trials)} of {run.run_id}, not {sorted(episodes)}",
                )
            for episode in sorted(episodes):
                if not (run.path / episode / "trajectory.json").exists():
                    continue
                served = _get(f"{base}/jobs/{run.run_id}/trials/{episode}/trajectory")
                if served.get("session_id") != f"{run.run_id}/{episode}":
                    return False, f"Harbor's viewer served no trajectory for {run.run_id}/{episode}"
                trajectories += 1
        return True, f"Harbor's viewer lists {len(runs)} job(s) and serves {trajectories} trajectory(ies)"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="fixos-atif-") as tmp:
        ok, said = check([Path(a) for a in argv], Path(tmp))
    print(said)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
