"""Export scenarios to Harbor tasks and run each the way Harbor does (a script, not a
test): the reference solution must score 1.0 and doing nothing 0.0. Prints a table
and writes results/export-check.json.

    .venv/bin/python scripts/check_export.py [--scenarios ids|easy|medium|hard] [--seeds 1]
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
import time
from pathlib import Path

from rich.table import Table

from fixos.cli.common import parse_seeds
from fixos.exporter import export_harbor
from fixos.exporter.trial import build, run_trial
from fixos.scenarios.catalog import load_catalog, select
from fixos.stack.engine import connect
from fixos.stack.hosts import LABEL_RUN
from fixos.stack.images import ensure_base, ensure_image
from fixos.stack.leftovers import remove_labelled
from fixos.stack.sources import pip_build_options
from fixos.views.console import make_console

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="*")
    parser.add_argument("--seeds", type=parse_seeds, default=[1])
    parser.add_argument("--out", type=Path, help="keep the tasks here (default: a temporary directory)")
    args = parser.parse_args()
    console = make_console()
    client = connect()
    pip_options = pip_build_options()  # this machine's index settings; FIXOS_PIP_OPTIONS overrides
    scenarios = select(load_catalog(), args.scenarios)
    images = {name: ensure_image(client, name, console.print) for name in ("server", "inspector")}
    base = ensure_base(client, console.print)
    run_id = f"export-check-{secrets.token_hex(3)}"
    out = args.out or Path(tempfile.mkdtemp(prefix="fixos-harbor-"))
    rows = []
    try:
        for scenario in scenarios:
            for seed in args.seeds:
                started = time.monotonic()
                [task] = export_harbor([scenario], [seed], out, client=client, images=images, run_id=run_id)
                exported = time.monotonic() - started
                tag = f"fixos-export-check/{task.name}:{run_id}"
                built = build(
                    client, task, tag, run_id=run_id, buildargs={"BASE": base, "PIP_OPTIONS": pip_options}
                )
                solved = run_trial(client, task, tag, run_id=run_id, solve=True)
                nop = run_trial(client, task, tag, run_id=run_id, solve=False)
                row = {
                    "task": task.name,
                    "export_s": round(exported, 1),
                    "build_s": round(built, 1),
                    "boot_s": round(solved.boot_seconds, 1),
                    "solution": solved.reward["reward"],
                    "nothing": nop.reward["reward"],
                    "ok": solved.reward["reward"] == 1.0 and nop.reward["reward"] == 0.0,
                }
                if not row["ok"]:
                    row["failing"] = [c for c in solved.checks + nop.checks if not c["passed"]]
                rows.append(row)
                console.print(json.dumps(row), highlight=False, markup=False)
    finally:
        remove_labelled(client, run_id=run_id)
        for image in client.images.list(filters={"label": f"{LABEL_RUN}={run_id}"}):
            client.images.remove(image.id, force=True)
    table = Table("task", "export s", "build s", "boot s", "solve.sh", "nothing", "ok")
    for r in rows:
        table.add_row(
            r["task"], *(str(r[k]) for k in ("export_s", "build_s", "boot_s", "solution", "nothing", "ok"))
        )
    console.print(table)
    (ROOT / "results").mkdir(exist_ok=True)
    (ROOT / "results" / "export-check.json").write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
