"""Train a small tool-calling model to repair FixOS servers with TRL's GRPO (an example; not run in tests).

    pip install -e . "trl>=1.8" "transformers>=5.2" jmespath   # plus torch, and a GPU for a real run
    FIXOS_TASK=easy_1,easy_2,medium_1 python examples/trl_grpo.py

Each rollout gets its own live, broken host (a FixOSToolEnv from fixos.training.trl): the model calls
``run(command)`` until it stops (and ``report(report)`` to say what was wrong: graded into
``env.verdict["diagnosis"]``, not the reward), and the verifier's score (``get_reward``) is the reward. Hosts
boot per reset, so keep ``per_device_train_batch_size`` (the number of live hosts at once)
within what the Docker engine's machine holds; ~150 MB of memory each.
"""

from __future__ import annotations

import os

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from fixos.scenarios.catalog import load_catalog
from fixos.training.trl import FixOSToolEnv

SYSTEM = (
    "You are an on-call engineer with a root shell on a Debian server (nginx, php-fpm, MariaDB, "
    "sysvinit). Investigate with the run tool, repair the cause, leave everything else as it was, "
    "say what was wrong with the report tool, then stop calling tools."
)


def dataset(tasks: list[str], seeds: range) -> Dataset:
    """One row per (task, seed): the prompt TRL renders, and task_id/seed that reach reset(**row);
    reset's return (the user's report of the symptoms) is appended to the prompt."""
    rows = [(t, s) for t in tasks for s in seeds]
    return Dataset.from_dict(
        {
            "prompt": [
                [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ""}] for _ in rows
            ],
            "task_id": [t for t, _ in rows],
            "seed": [s for _, s in rows],
        }
    )


def main() -> None:
    tasks = (
        os.environ.get("FIXOS_TASK", "").split(",") if os.environ.get("FIXOS_TASK") else list(load_catalog())
    )
    trainer = GRPOTrainer(
        model=os.environ.get("MODEL", "Qwen/Qwen3-0.6B"),
        train_dataset=dataset(tasks, range(1, 9)),
        environment_factory=FixOSToolEnv,  # get_reward() is the reward: no reward_funcs needed
        args=GRPOConfig(
            output_dir="results/grpo-fixos",
            max_steps=200,
            num_generations=4,
            per_device_train_batch_size=4,
            max_completion_length=4096,
            chat_template_kwargs={"enable_thinking": False},
        ),
    )
    trainer.train()


if __name__ == "__main__":
    main()
