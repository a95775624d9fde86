"""Agents end to end on real containers: baseline, llm (against a local chat server),
external (a real OpenSSH client), custom import paths, play, show, and the Python API."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import ROOT, ChatServer, start_fixos
from rich.console import Console

import fixos
from fixos.agents.llm import LlmAgent, LlmError, command_of
from fixos.cli.main import main
from fixos.episodes.episode import run_episode
from fixos.injector.families import families_of
from fixos.records.models import EpisodeRecord
from fixos.scenarios.catalog import load_catalog
from fixos.stack.leftovers import remove_labelled
from fixos.stack.pool import HostPool

CATALOG = load_catalog()


# What the baseline's generic rules (agents/baseline.py: no scenario ids, no seeded names
# or paths) must still solve, per fault family, on scenarios of that family alone (seed 1;
# `fixos bench --agent baseline` gives the figure of every family, NOTES.md the last one).
# Not asserted, because generic rules do not reach them: tls, host (descriptor limits),
# config of the php-fpm pool, and every multi-host scenario (it repairs the login host only).
BASELINE_SOLVES = {
    "service": ["easy_1", "easy_2"],
    "disk": ["easy_3", "medium_3"],
    "process": ["easy_4", "medium_6"],
    "config": ["medium_1", "medium_2"],
    "permissions": ["medium_4", "medium_5"],
    "database": ["medium_7"],
}


BASELINE_JOBS = 3
"""episodes of the baseline side by side on one warm pool, as `fixos bench` runs them (one
after another they took about 230 s of CI, mostly waiting on the hosts)."""


@pytest.fixture(scope="module")
def baseline_runs(request, client, images) -> Iterator[dict[str, tuple[EpisodeRecord, list]]]:
    """Every selected scenario of the baseline test, run once, side by side on warm hosts."""
    selected = [
        item.callspec.params["scenario_id"]
        for item in request.session.items
        if item.module is request.module
        and hasattr(item, "callspec")
        and "scenario_id" in item.callspec.params
    ]
    run_id = f"test-baseline-{secrets.token_hex(4)}"
    pool = HostPool(
        client, images, run_id=run_id, size=BASELINE_JOBS, planned=[CATALOG[s].hosts for s in selected]
    )

    def one(scenario_id: str) -> tuple[EpisodeRecord, list]:
        return run_episode(
            CATALOG[scenario_id], 1, "baseline", client=client, images=images, run_id=run_id, pool=pool
        )

    try:
        with ThreadPoolExecutor(max_workers=BASELINE_JOBS) as workers:
            yield dict(zip(selected, workers.map(one, selected), strict=True))
    finally:
        pool.close()
        remove_labelled(client, run_id=run_id)


@pytest.mark.live
@pytest.mark.parametrize(
    "scenario_id", [pytest.param(s, id=f"{f}-{s}") for f, ids in BASELINE_SOLVES.items() for s in ids]
)
def test_baseline_solves_what_generic_rules_reach(baseline_runs, scenario_id):
    record, steps = baseline_runs[scenario_id]
    assert record.status == "scored", record.error
    assert record.reward == 1.0, [c.detail for c in record.verdict.checks if not c.passed]
    assert steps, "the baseline works through the shell"


def test_the_families_asserted_are_the_scenarios_own():
    for family, ids in BASELINE_SOLVES.items():
        for scenario_id in ids:
            assert families_of(CATALOG[scenario_id].fault_types) == [family], scenario_id


@pytest.mark.live
def test_llm_agent_against_a_local_chat_endpoint(client, images, test_run_id, tmp_path, monkeypatch, capsys):
    chat = ChatServer(
        ["Let me look.\n```bash\nservice nginx status\n```", "```bash\nservice nginx start\n```", "DONE"]
    )
    monkeypatch.setenv("API_BASE_URL", chat.url)
    monkeypatch.setenv("MODEL_NAME", "scripted-model")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    try:
        record, steps = run_episode(
            CATALOG["easy_1"], 1, "llm", client=client, images=images, run_id=test_run_id, workdir=tmp_path
        )
    finally:
        chat.close()
    assert record.reward == 1.0, record.error
    assert [s.command for s in steps] == ["service nginx status", "service nginx start"]
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
    assert lines[0] == "[START] task=easy_1 env=fixos model=scripted-model"
    assert re.fullmatch(
        r'\[STEP\] step=1 action="service nginx status" exit=3 reward=0.00 done=false error=null', lines[1]
    )
    assert lines[2].startswith('[STEP] step=2 action="service nginx start" exit=0')
    assert lines[3].startswith('[STEP] step=3 action="DONE"') and "done=true" in lines[3]
    assert lines[4] == "[END] success=true steps=2 score=1.00 rewards=1.00"
    assert chat.requests[0]["path"] == "/v1/chat/completions" and chat.requests[0]["auth"] == "Bearer sk-test"
    assert chat.requests[1]["messages"][-1]["content"].startswith("exit code 3")
    trajectory = [json.loads(x) for x in (tmp_path / "llm_trajectory.jsonl").read_text().splitlines()]
    assert trajectory[-1] == {"tokens": {"prompt": 300, "completion": 21}, "reward": 1.0}


def test_llm_agent_says_what_is_missing(monkeypatch, capsys, tmp_path):
    for name in ("API_BASE_URL", "MODEL_NAME", "HF_TOKEN", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(LlmError, match="API_BASE_URL, MODEL_NAME, HF_TOKEN or OPENAI_API_KEY"):
        LlmAgent.preflight()
    assert main(["run", "easy_1", "--agent", "llm", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fixos: ") and "MODEL_NAME" in err


def test_command_of_reads_blocks_and_done():
    assert command_of("I'll check.\n```bash\ndf -h\n```") == "df -h"
    assert command_of("```\nps aux\n```") == "ps aux"
    assert command_of("DONE") is None
    assert command_of("uptime") == "uptime"


@pytest.mark.live
def test_external_agent_over_a_real_ssh_client(images, tmp_path):
    proc = start_fixos("run", "easy_1", "--agent", "external", "--results", str(tmp_path))
    try:
        ssh_line = run_id = None
        deadline = time.monotonic() + 120
        while ssh_line is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "fixos ended before printing the ssh command"
            if line.startswith("ssh:"):
                ssh_line = line.split(":", 1)[1].strip()
            if "fixos verify " in line:
                run_id = line.rsplit(" ", 1)[1].strip()
        while run_id is None:
            line = proc.stdout.readline()
            if "fixos verify " in line:
                run_id = line.rsplit(" ", 1)[1].strip()
        done = subprocess.run(
            [*ssh_line.split(), "-o", "BatchMode=yes", "service nginx start"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert main(["verify", run_id, "--results", str(tmp_path)]) == 0
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "reward 1.0" in out


@pytest.mark.live
def test_custom_agent_by_import_path_and_show(images, tmp_path):
    console = Console(record=True, width=200)
    agent = "custom_agent_example:RestartWhatIsDown"
    assert main(["run", "easy_2", "--agent", agent, "--results", str(tmp_path)], console=console) == 0
    assert "reward 1.0" in console.export_text()
    (run_dir,) = tmp_path.iterdir()
    (episode,) = [p.name for p in run_dir.iterdir() if p.is_dir()]
    shown = Console(record=True, width=200)
    assert main(["show", f"{run_dir.name}/{episode}", "--results", str(tmp_path)], console=shown) == 0
    text = shown.export_text()
    assert "$ service mariadb status" in text and "$ service mariadb start" in text and "reward 1.0" in text


def test_unknown_custom_agent_is_a_clear_error(capsys, tmp_path):
    assert main(["run", "easy_1", "--agent", "no_such_module:Agent", "--results", str(tmp_path)]) == 2
    assert "unknown agent 'no_such_module:Agent'" in capsys.readouterr().err


@pytest.mark.live
def test_play_scores_what_the_human_typed(images, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "fixos.cli", "play", "easy_1", "--results", str(tmp_path)],
        cwd=ROOT,
        input="service nginx start\nexit\n",
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "reward 1.0" in done.stdout


@pytest.mark.live
@pytest.mark.parametrize("transport", ["exec", "ssh"])
def test_python_api(images, transport):
    with fixos.episode("easy_1", seed=2, transport=transport) as ep:
        assert ep.shell.run("service nginx status").exit_code != 0
        ep.shell.run("service nginx start")
        verdict = ep.verify()
    assert verdict.reward == 1.0
