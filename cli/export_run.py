"""``fixos export-run RUN OUT``: a finished run as a Harbor job (``records.harbor_job``), for
``harbor view OUT`` and other readers of Harbor's job directories."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from ..records.harbor_job import export_run
from ..records.rundir import RunDir
from ..scenarios.catalog import load_catalog
from .common import DEFAULT_RESULTS
from .view import instructions, run_directory


def add_parser(sub: argparse._SubParsersAction) -> None:
    export_run_ = sub.add_parser(
        "export-run", help="write a run as Harbor job and trial directories (for `harbor view OUT`)"
    )
    export_run_.add_argument("run", help="a run id under --results, or a run directory")
    export_run_.add_argument("out", type=Path, help="Harbor's jobs directory: the job is OUT/<run-id>/")
    export_run_.add_argument("--results", type=Path, default=DEFAULT_RESULTS)


def cmd_export_run(args: argparse.Namespace, console: Console) -> int:
    directory = run_directory(args.results, args.run)
    run = RunDir(directory.parent, directory.name)
    # The scenario's own words open each trajectory, as the agent was given them.
    texts = instructions(load_catalog(args.scenario_dir), (r.scenario for r in run.records()))
    job = export_run(run, args.out, texts)
    trials = sum(1 for p in job.iterdir() if p.is_dir())
    console.print(
        f"Harbor job: {job} ({trials} trial(s)); open it with `harbor view {args.out}`", highlight=False
    )
    return 0
