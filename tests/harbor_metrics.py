"""What Harbor reports for a set of trials' reward files, computed by Harbor's own code.

Run with an interpreter that has Harbor installed (Python >= 3.12; not FixOS's
venv): ``python harbor_metrics.py DIR``. DIR holds Harbor's trial layout,
``DIR/<agent>/<task>__<n>/verifier/reward.json``. Each file is read by Harbor's
verifier parser, and the job's statistics are built as Harbor's ``Job`` builds them
(``JobStats.from_trial_results``, the default ``Mean`` metric,
``compute_pass_at_k_by_evals``). Prints JSON: per agent, the metrics, pass@k, and
the headline (``hub.models.primary_reward``: the first value of the first metric,
the figure Harbor's hub shows for a job). The CLI's table goes to stderr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

from harbor.cli import jobs as cli_jobs
from harbor.hub.models import primary_reward
from harbor.metrics.mean import Mean
from harbor.models.job.result import JobResult, JobStats
from harbor.models.trial.paths import TrialPaths
from harbor.models.trial.result import AgentInfo, TrialResult
from harbor.models.verifier.result import VerifierResult
from harbor.utils.pass_at_k import compute_pass_at_k_by_evals
from harbor.verifier.verifier import Verifier
from rich.console import Console


def trial_results(root: Path) -> list[TrialResult]:
    results = []
    for reward_file in sorted(root.glob("*/*/verifier/reward.json")):
        trial_dir = reward_file.parent.parent
        paths = TrialPaths(trial_dir)
        rewards = Verifier._parse_reward_json(SimpleNamespace(trial_paths=paths))  # type: ignore[arg-type]
        results.append(
            TrialResult.model_construct(
                task_name=trial_dir.name.split("__")[0],
                trial_name=trial_dir.name,
                source="fixos",
                agent_info=AgentInfo(name=trial_dir.parent.name, version="1"),
                verifier_result=VerifierResult(rewards=rewards),
                exception_info=None,
                step_results=None,
                agent_result=None,
            )
        )
    return results


def main(root: str) -> int:
    trials = trial_results(Path(root))
    stats = JobStats.from_trial_results(trials)
    by_key: dict[str, list] = {}
    for trial in trials:
        key = JobStats.format_agent_evals_key(trial.agent_info.name, None, trial.source or "adhoc")
        by_key.setdefault(key, []).append(trial.verifier_result.rewards)
    for key, rewards in by_key.items():
        stats.evals[key].metrics.append(Mean().compute(rewards))
    for key, pass_at_k in compute_pass_at_k_by_evals(trials).items():
        stats.evals[key].pass_at_k = pass_at_k
    cli_jobs.console = Console(file=sys.stderr, width=200)
    cli_jobs.print_job_results_tables(JobResult.model_construct(stats=stats, trial_results=trials))
    report = {
        key: {
            "metrics": e.metrics,
            "pass_at_k": {str(k): v for k, v in e.pass_at_k.items()},
            "headline": primary_reward({key: {"metrics": e.metrics}}),
        }
        for key, e in stats.evals.items()
    }
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
