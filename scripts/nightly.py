"""The nightly sweep (`make nightly`): what CI samples, in full.

- every scenario x seeds 1-3 x oracle, nop and partial (``tests/test_scenarios_live.py``
  with FIXOS_SCENARIO_SEEDS=all): oracle 1.0, nop 0.0, partial strictly between;
- the first 8 generated worlds of each level (seed 1), oracle, nop and partial alike;
- every adversarial strategy on every scenario it applies to, hard and multi-host ones
  included (``tests/test_adversarial.py`` with FIXOS_ADVERSARY_SWEEP=all): each <= 0.2
  and scored;
- the oracle at the report-only level ``diagnose`` on every scenario (reports the truth,
  touches nothing: 1.0; ``tests/test_tasks_live.py`` with FIXOS_TASK_SWEEP=all);
- with ``--harbor``, every scenario exported and run under Harbor itself
  (``make harbor-check ARGS=--all``).

``--shard K/N`` runs every N-th episode from the K-th (the workflow template's matrix
runs N of them side by side on N machines). Prints the time taken and writes a JUnit
file under ``results/nightly/``. Exit status: pytest's (and Harbor's check's).

    .venv/bin/python scripts/nightly.py [--shard 1/4] [--harbor] [-- extra pytest args]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parent.parent
MODULES = (
    "tests/test_scenarios_live.py::test_scenario_scores",
    "tests/test_adversarial.py::test_adversary_earns_nothing",
    "tests/test_tasks_live.py::test_the_oracle_that_reports_and_touches_nothing_scores_full_at_diagnose",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shard", default="1/1", help="K/N: the K-th of N interleaved parts (default 1/1)")
    parser.add_argument("--harbor", action="store_true", help="also every scenario under Harbor itself")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest as they are")
    args = parser.parse_args()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = ROOT / "results" / "nightly" / f"{stamp}-shard-{args.shard.replace('/', '-of-')}"
    out.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "FIXOS_SCENARIO_SEEDS": "all",
        "FIXOS_ADVERSARY_SWEEP": "all",
        "FIXOS_GENERATED": "8",
        "FIXOS_TASK_SWEEP": "all",
        # More episodes side by side than CI's 3 and 4: the sweep's hard and multi-host
        # episodes wait (holds, restarts) more than easy ones; a user's own value stays.
        "FIXOS_SCENARIO_JOBS": os.environ.get("FIXOS_SCENARIO_JOBS", "5"),
        "FIXOS_ADVERSARY_JOBS": os.environ.get("FIXOS_ADVERSARY_JOBS", "5"),
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        *MODULES,
        f"--shard={args.shard}",
        f"--junitxml={out / 'junit.xml'}",
        "-p",
        "no:cacheprovider",
        *args.pytest_args,
    ]
    print(f"[nightly] shard {args.shard}: {' '.join(command[3:])}", flush=True)
    started = time.monotonic()
    status = subprocess.call(command, cwd=ROOT, env=env)
    swept = time.monotonic() - started
    junit = out / "junit.xml"
    tests = junit_tests(junit)
    rate = f", {tests} tests, {tests / (swept / 60):.1f} a minute" if tests else ""
    print(f"[nightly] shard {args.shard}: sweep {swept / 60:.1f} min{rate}, exit {status}; {junit}")
    if args.harbor:
        started = time.monotonic()
        harbor = subprocess.call(
            [sys.executable, "scripts/harbor_check.py", "--all", *harbor_version()], cwd=ROOT, env=env
        )
        print(f"[nightly] Harbor, every scenario: {(time.monotonic() - started) / 60:.1f} min, exit {harbor}")
        status = status or harbor
    return status


def junit_tests(path: Path) -> int:
    """How many tests the JUnit file counts (an episode each but one: the diagnose sweep's)."""
    try:
        suites = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return 0
    return sum(int(s.get("tests", 0)) for s in suites.iter("testsuite"))


def harbor_version() -> list[str]:
    version = os.environ.get("HARBOR_VERSION")
    return ["--harbor-version", version] if version else []


if __name__ == "__main__":
    sys.exit(main())
