"""`make harbor-check`: exported FixOS tasks run under Harbor itself, oracle and nop.

One task per family (single host, multi-host, HTTPS, network, cron re-breaker; every
scenario with --all) is exported with ``fixos export --format harbor`` and run through
``harbor run`` with Harbor's local Docker environment, with Harbor's ``oracle`` and
``nop`` agents, ``--trials`` times each: the oracle must score 1.0 and nop 0.0 on
every trial, for the repair (reward.json) and for the report (diagnosis.json: the
oracle's solve.sh writes the true report, nop none). Beside them runs a deliberately
broken export (easy_1 with the healthy record of its tables gate altered in
tests/spec.json): its oracle must not score 1.0, and must fail on that gate, which
proves the check can fail. Prints a table and the Harbor version; writes summary.json,
the tasks and Harbor's own job directories under --out. Exit 0 when every row is as
expected, 1 when one is not, 2 when Harbor cannot be set up or run here (one line says why).

    .venv/bin/python scripts/harbor_check.py [--all] [--families single,multi] [--trials 2]
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harbor_env import (
    HARBOR_VERSION,
    ROOT,
    HarborError,
    HarborTrial,
    ensure_harbor,
    harbor_env,
    read_metrics,
    run_job,
)
from harbor_trajectories import check as check_trajectories
from rich.table import Table

from fixos.exporter import export_harbor
from fixos.scenarios.catalog import load_catalog
from fixos.stack.engine import connect
from fixos.stack.images import ensure_base, ensure_image
from fixos.stack.leftovers import remove_labelled
from fixos.views.console import make_console

FAMILIES = {
    "single": "easy_1",
    "multi": "split_1",
    "tls": "tls_1",
    "network": "net_1",
    "cron": "cron_1",
}
"""one scenario per family: what a Harbor user of each kind of task runs first."""
SEED = 1
TAMPERED_GATE = "steady: every table is the healthy host's"
EXPECTED = {"oracle": 1.0, "nop": 0.0}


def _export(scenario_ids: list[str], out: Path, console) -> list[Path]:
    """Each scenario x SEED exported under ``out`` (three captures at a time)."""
    catalog = load_catalog()
    client = connect()
    images = {name: ensure_image(client, name, console.print) for name in ("server", "inspector")}
    rid = f"harbor-check-{secrets.token_hex(3)}"
    try:
        with ThreadPoolExecutor(3) as pool:
            jobs = [
                pool.submit(
                    export_harbor, [catalog[sid]], [SEED], out, client=client, images=images, run_id=rid
                )
                for sid in scenario_ids
            ]
            return [task for job in jobs for task in job.result()]
    finally:
        remove_labelled(client, run_id=rid)


def _tamper(task: Path, out: Path) -> Path:
    """A copy of ``task`` whose tables gate remembers a healthy table that never was."""
    bad = out / f"{task.name}-tampered"
    shutil.rmtree(bad, ignore_errors=True)
    shutil.copytree(task, bad)
    spec_path = bad / "tests" / "spec.json"
    spec = json.loads(spec_path.read_text())
    tables = spec["baseline"][TAMPERED_GATE]["tables"]
    table = sorted(t for t in tables if not t.startswith("mysql."))[0]
    tables[table] = str(int(tables[table]) + 1) if tables[table].isdigit() else "1"
    spec_path.write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n")
    return bad


def _row_ok(agent: str, trials: list[HarborTrial], negative: bool) -> bool:
    if not trials or any(t.reward is None for t in trials):
        return False
    if negative:  # must fail, and on the gate whose record was altered
        return all(t.reward < 1.0 and TAMPERED_GATE in t.checks_failed for t in trials)
    return all(t.reward == EXPECTED[agent] and t.diagnosis == EXPECTED[agent] for t in trials)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every scenario of the catalogue (nightly)")
    parser.add_argument("--families", default=",".join(FAMILIES), help=f"some of {','.join(FAMILIES)}")
    parser.add_argument("--trials", type=int, default=2, help="trials per task and agent (default 2)")
    parser.add_argument("-n", "--concurrent", type=int, default=4, help="Harbor's concurrent trials")
    parser.add_argument("--harbor-version", default=HARBOR_VERSION)
    parser.add_argument("--out", type=Path, help="default: results/harbor-check/<time>")
    args = parser.parse_args()
    console = make_console()

    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False)

    families = [f for f in args.families.split(",") if f]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        known = ", ".join(FAMILIES)
        console.print(f"harbor-check: --families: unknown {', '.join(unknown)} (known: {known})")
        return 2
    out = args.out or ROOT / "results" / "harbor-check" / time.strftime("%Y%m%d-%H%M%S")
    started = time.monotonic()
    try:
        if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0:
            raise HarborError("'docker compose' does not answer: scripts/ensure-compose installs it")
        harbor = ensure_harbor(args.harbor_version, say=say)
        # FixOS's own trajectories and a run exported as Harbor's job, read by Harbor's models (~2 s).
        atif_ok, atif_said = check_trajectories([], out / "atif")
        say(f"[harbor] ATIF trajectories and run export: {atif_said.splitlines()[-1]}")
        version = subprocess.run([str(harbor), "--version"], capture_output=True, text=True).stdout.strip()
        scenario_ids = sorted(load_catalog()) if args.all else [FAMILIES[f] for f in families]
        tasks_dir, negative_dir = out / "tasks", out / "negative"
        tasks = _export(scenario_ids, tasks_dir, console)
        negative_dir.mkdir(parents=True, exist_ok=True)
        source = next((t for t in tasks if t.name == f"easy_1-s{SEED}"), None)
        if source is None:
            source = _export(["easy_1"], out / "negative-source", console)[0]
        bad = _tamper(source, negative_dir)
        env = harbor_env(ensure_base(connect(), console.print))
        exported = time.monotonic() - started
        say(f"[harbor] {len(tasks)} task(s) exported in {exported:.0f}s; running Harbor {version}")
        log = out / "harbor.log"
        with ThreadPoolExecutor(2) as pool:
            main_job = pool.submit(
                run_job,
                harbor,
                tasks_dir,
                agents=list(EXPECTED),
                attempts=args.trials,
                concurrent=args.concurrent,
                env=env,
                jobs_dir=out / "jobs",
                job_name="check",
                log=log,
            )
            negative_job = pool.submit(
                run_job,
                harbor,
                negative_dir,
                agents=["oracle"],
                attempts=1,
                concurrent=1,
                env=env,
                jobs_dir=out / "jobs",
                job_name="negative",
                log=out / "harbor-negative.log",
            )
            trials, negative = main_job.result(), negative_job.result()
    except HarborError as exc:
        say(f"make harbor-check: {exc}")
        return 2
    rows = []
    for task in [t.name for t in tasks] + [bad.name]:
        is_negative = task == bad.name
        for agent in ["oracle"] if is_negative else list(EXPECTED):
            mine = [t for t in (negative if is_negative else trials) if t.task == task and t.agent == agent]
            rows.append(
                {
                    "task": task,
                    "agent": agent,
                    "rewards": [t.reward for t in mine],
                    "diagnoses": [t.diagnosis for t in mine],
                    "exceptions": [t.exception for t in mine if t.exception],
                    "expected": f"< 1.0, failing '{TAMPERED_GATE}'"
                    if is_negative
                    else f"{EXPECTED[agent]}, diagnosis {EXPECTED[agent]}",
                    "failing": sorted({c for t in mine for c in t.checks_failed}),
                    "ok": _row_ok(agent, mine, is_negative),
                }
            )
    # Harbor's own summary of the job: its mean reward and pass@k per agent (computed only
    # when a reward file has exactly one key) must say the same as the rows.
    metrics = read_metrics(out / "jobs" / "check")
    for agent, want in EXPECTED.items():
        got = metrics.get(agent, {})
        pass_k = got.get("pass_at_k", {}).get(str(args.trials))
        rows.append(
            {
                "task": "(Harbor's job metrics)",
                "agent": agent,
                "rewards": [got.get("mean"), pass_k],
                "exceptions": [],
                "expected": f"mean {want}, pass@{args.trials} {want}",
                "failing": [],
                "ok": got.get("mean") == want and (args.trials < 2 or pass_k == want),
            }
        )
    rows.append(
        {
            "task": "(FixOS trajectories, run as job)",
            "agent": "-",
            "rewards": [],
            "exceptions": [],
            "expected": "Harbor's models read every file",
            "failing": [] if atif_ok else atif_said.splitlines()[:3],
            "ok": atif_ok,
        }
    )
    seconds = time.monotonic() - started
    table = Table("task", "agent", "rewards", "expected", "ok", title=f"Harbor {version}, {seconds:.0f}s")
    for r in rows:
        rewards = ", ".join("-" if x is None else f"{x:.2f}" for x in r["rewards"]) or "(no trial)"
        table.add_row(r["task"], r["agent"], rewards, str(r["expected"]), "yes" if r["ok"] else "NO")
    console.print(table)
    for r in rows:
        if not r["ok"]:
            said = f"failing {r['failing']} exceptions {r['exceptions']} diagnoses {r.get('diagnoses')}"
            console.print(f"  {r['task']} {r['agent']}: {said}")
    summary = {"harbor": version, "seconds": round(seconds, 1), "rows": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    say(f"[harbor] {out}/summary.json; Harbor's jobs under {out}/jobs")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
