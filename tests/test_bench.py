"""Bench at scale: parallel episodes, durable results, resume after SIGKILL,
junit/report/summary, shards, and the nightly regression comparison."""

from __future__ import annotations

import json
import os
import signal
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import Watch, containers_owned_by, episode_record, labelled, start_fixos, wait_for
from rich.console import Console

from fixos.bench.local import Bench, Plan, parse_shard
from fixos.cli.main import main
from fixos.records.report import junit_xml, write_reports
from fixos.records.rundir import RunDir
from fixos.records.summary import compare, summarize
from fixos.scenarios.catalog import load_catalog
from fixos.stack.engine import Engine


def test_shards_split_the_jobs_deterministically():
    plan = Plan(scenarios=["a", "b", "c"], seeds=[1, 2], agents=["x", "y"])
    shards = [plan.model_copy(update={"shard": (i, 3)}).jobs() for i in (1, 2, 3)]
    assert sorted(j.episode_id for s in shards for j in s) == sorted(j.episode_id for j in plan.jobs())
    assert all(len(s) == 4 for s in shards)
    assert shards[0] == Plan(scenarios=["a", "b", "c"], seeds=[1, 2], agents=["x", "y"], shard=(1, 3)).jobs()
    with pytest.raises(ValueError, match="1/4"):
        parse_shard("4/3")


def test_junit_has_a_testcase_per_episode_with_failures_and_errors():
    records = [
        episode_record("easy_1", "oracle", 1.0),
        episode_record("easy_1", "nop", 0.0),
        episode_record("easy_2", "nop", None),
    ]
    suite = ET.fromstring(junit_xml("r", records).split("\n", 1)[1])
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [r.episode_id for r in records]
    assert cases[0].find("failure") is None and cases[0].find("error") is None
    assert cases[1].find("failure") is not None
    assert cases[2].find("error").get("message") == "boot_failed: StackError: boom"
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "1")


def test_compare_flags_drops_and_broken_scenarios_only():
    base = summarize(
        "old",
        [
            episode_record("easy_1", "baseline", 1.0),
            episode_record("hard_1", "baseline", 0.6, difficulty="hard"),
        ],
    )
    same = summarize(
        "new",
        [
            episode_record("easy_1", "baseline", 1.0),
            episode_record("hard_1", "baseline", 0.6, difficulty="hard"),
        ],
    )
    assert compare(same, base, 0.05) == []
    within = summarize(
        "new",
        [
            episode_record("easy_1", "baseline", 1.0),
            episode_record("hard_1", "baseline", 0.56, difficulty="hard"),
        ],
    )
    assert compare(within, base, 0.05) == []
    worse = summarize(
        "new",
        [
            episode_record("easy_1", "baseline", 0.5),
            episode_record("hard_1", "baseline", 0.6, difficulty="hard"),
        ],
    )
    assert compare(worse, base, 0.05) == ["easy_1 (baseline): mean reward 0.50 < 1.00 - 0.05"]
    broken = summarize("new", [episode_record("easy_1", "oracle", 0.5)])
    assert compare(broken, summarize("old", []), 0.05) == [
        "broken scenario: oracle scored below 1.0 in easy_1-s1-oracle"
    ]


def test_reports_render(tmp_path):
    records = [
        episode_record("easy_1", "oracle", 1.0),
        episode_record("easy_1", "nop", 0.0),
        episode_record("hard_1", "nop", 0.5, difficulty="hard"),
    ]
    summary = write_reports(tmp_path, "r", records)
    assert summary.scenarios["easy_1"].agents["oracle"].solved_pct == 100.0
    report = (tmp_path / "report.md").read_text()
    assert "![mean reward per scenario](scores.svg)" in report and "| hard_1 | hard |" in report
    # the chart: one bar per scenario and agent, as tall as the mean reward (0.5 half the 1.0)
    svg = ET.fromstring((tmp_path / "scores.svg").read_text())
    bars = {
        (r.get("data-scenario"), r.get("data-agent")): float(r.get("height"))
        for r in svg.iter("{http://www.w3.org/2000/svg}rect")
        if r.get("data-scenario")
    }
    assert set(bars) == {(s, a) for s in ("easy_1", "hard_1") for a in ("nop", "oracle")}
    assert bars[("easy_1", "oracle")] == 2 * bars[("hard_1", "nop")] > 0 == bars[("easy_1", "nop")]
    assert json.loads((tmp_path / "summary.json").read_text())["episodes"] == 3


@pytest.mark.live
def test_parallelism_is_honoured_exactly(client, images, tmp_path):
    catalog = load_catalog()
    run = RunDir(tmp_path, "par")

    events = Watch()
    plan = Plan(scenarios=["easy_1"], seeds=[1, 2, 3, 4], agents=["nop"])
    engines = [Engine("local", client, images)]
    Bench(plan, run, catalog, engines=engines, parallel=2, events=events).execute()
    assert events.peak == 2
    assert sorted(r.episode_id for r in run.records()) == sorted(j.episode_id for j in plan.jobs())
    assert labelled(client, "par") == []


@pytest.mark.live
def test_sigkill_then_sweep_then_resume(client, images, tmp_path):
    args = ["--scenarios", "easy_1", "easy_3", "--seeds", "1-3", "--agent", "nop", "-j", "2"]
    proc = start_fixos("bench", *args, "--results", str(tmp_path), quiet=True)
    (run_dir,) = _wait_for_run_dir(tmp_path)
    run_id = run_dir.name
    journal = run_dir / "episodes.jsonl"
    try:
        wait_for(lambda: journal.exists() and len(journal.read_text().splitlines()) >= 1, timeout=120)
        wait_for(lambda: bool(containers_owned_by(client, proc.pid, run_id)), timeout=60)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert labelled(client, run_id), "SIGKILL left containers behind (as it must: nothing ran after it)"
    console = Console(record=True, width=200)
    assert main(["bench", "--resume", run_id, "--results", str(tmp_path)], console=console) == 0
    text = console.export_text()
    assert f"removed leftovers of dead run(s): {run_id}" in text
    ids = [json.loads(line)["episode_id"] for line in journal.read_text().splitlines()]
    assert sorted(ids) == sorted(f"{s}-s{n}-nop" for s in ("easy_1", "easy_3") for n in (1, 2, 3))
    assert len(ids) == len(set(ids)), "every episode recorded once"
    assert labelled(client, run_id) == []
    assert ET.parse(run_dir / "junit.xml").getroot().get("tests") == "6"


def _wait_for_run_dir(root: Path) -> list[Path]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        dirs = [p for p in root.iterdir() if p.is_dir()]
        if dirs:
            return dirs
        time.sleep(0.1)
    raise AssertionError("bench never created its run directory")


@pytest.mark.live
def test_compare_on_the_command_line(images, tmp_path):
    console = Console(record=True, width=200)
    args = [
        "bench",
        "--scenarios",
        "easy_1",
        "--agent",
        "oracle",
        "--agent",
        "nop",
        "--results",
        str(tmp_path),
    ]
    assert main(args, console=console) == 0
    (run_dir,) = list(tmp_path.iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert main([*args, "--compare", str(run_dir / "summary.json")], console=console) == 0
    summary["scenarios"]["easy_1"]["agents"]["nop"]["mean_reward"] = 0.5  # a planted better past
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps(summary))
    console = Console(record=True, width=200)
    assert main([*args, "--compare", str(planted)], console=console) == 2
    assert "regression: easy_1 (nop): mean reward 0.00 < 0.50 - 0.05" in console.export_text()
