"""Harbor's own models read what FixOS wrote: run by Harbor's interpreter, never FixOS's.

    .venv/harbor/bin/python scripts/harbor_validate.py JOBS_DIR [TRAJECTORY.json ...]

Every job under JOBS_DIR (``fixos export-run``) is read as Harbor's viewer reads it
(``harbor.viewer.scanner.JobScanner``: JobConfig, JobResult, each trial's TrialConfig and
TrialResult), and each trial's ``agent/trajectory.json``, plus any trajectory named after
JOBS_DIR, by ``harbor.models.trajectories.Trajectory``. The scanner logs and swallows a
file it cannot parse, so each file is validated here directly as well: a file that does not
fit is one line naming it and the first problem, and the exit code is 1; so are a job's
counts (trials, errors per agent) that differ from those Harbor's ``JobStats`` makes of its
trials. Prints one line per job (trials, rewards) and exits 0 when everything fits.

Imports only Harbor (and the standard library): FixOS runs on Python 3.11, Harbor on >= 3.12.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harbor.models.job.config import JobConfig
from harbor.models.job.result import JobResult, JobStats
from harbor.models.trajectories import Trajectory
from harbor.models.trial.config import TrialConfig
from harbor.models.trial.result import TrialResult
from harbor.viewer.scanner import JobScanner
from pydantic import BaseModel, ValidationError


def _check(model: type[BaseModel], path: Path, problems: list[str]) -> BaseModel | None:
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError) as exc:
        first = str(exc).splitlines()
        problems.append(f"{path}: not a valid {model.__name__}: {' '.join(first[:3])}")
        return None


def _same_counts(written: JobStats, harbor: JobStats, where: Path, problems: list[str]) -> None:
    def counts(stats: JobStats) -> dict:
        per_eval = {key: (ev.n_trials, ev.n_errors) for key, ev in stats.evals.items()}
        return {"completed": stats.n_completed_trials, "errored": stats.n_errored_trials, "evals": per_eval}

    if counts(written) != counts(harbor):
        problems.append(f"{where}/result.json: stats {counts(written)}, Harbor counts {counts(harbor)}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    jobs_dir, problems, trajectories = Path(argv[0]), [], 0
    scanner = JobScanner(jobs_dir)
    for job in scanner.list_jobs():
        _check(JobConfig, jobs_dir / job / "config.json", problems)
        job_result = _check(JobResult, jobs_dir / job / "result.json", problems)
        rewards, results = [], []
        for trial in scanner.list_trials(job):
            trial_dir = jobs_dir / job / trial
            _check(TrialConfig, trial_dir / "config.json", problems)
            result = _check(TrialResult, trial_dir / "result.json", problems)
            if _check(Trajectory, trial_dir / "agent" / "trajectory.json", problems) is not None:
                trajectories += 1
            if result is not None:
                results.append(result)
                got = (result.verifier_result.rewards or {}) if result.verifier_result else {}
                rewards.append(f"{trial}={got.get('reward', '-')}")
        if isinstance(job_result, JobResult):  # the job's counts as Harbor's own JobStats makes them
            _same_counts(job_result.stats, JobStats.from_trial_results(results), jobs_dir / job, problems)
        seen = scanner.get_job_result(job) is not None and scanner.get_job_config(job) is not None
        print(f"job {job}: {len(rewards)} trial(s) {' '.join(rewards)}; viewer reads the job: {seen}")
        if not seen:
            problems.append(f"{jobs_dir / job}: Harbor's viewer cannot read the job's config or result")
    for extra in argv[1:]:
        if _check(Trajectory, Path(extra), problems) is not None:
            trajectories += 1
    for line in problems:
        print(line, file=sys.stderr)
    print(f"{trajectories} trajectory(ies) valid; {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
