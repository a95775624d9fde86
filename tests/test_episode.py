"""Whole episodes against real containers: scores, confirmation, and nothing left behind."""

from __future__ import annotations

import json
import signal
import socket
import time

import pytest
from helpers import containers_owned_by, labelled, start_fixos, wait_for
from rich.console import Console

from fixos.cli.main import main
from fixos.episodes.durability import STABLE_CHECK
from fixos.episodes.episode import Episode, run_episode
from fixos.records.rundir import RunDir
from fixos.scenarios.catalog import load_catalog
from fixos.stack.hosts import LABEL_OWNER, LABEL_RUN
from fixos.stack.leftovers import sweep_dead_runs
from fixos.stack.names import owner_label

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def easy_1():
    return load_catalog()["easy_1"]


@pytest.mark.parametrize(("agent", "reward"), [("oracle", 1.0), ("nop", 0.0)])
def test_oracle_solves_and_nop_does_not(client, images, test_run_id, tmp_path, easy_1, agent, reward):
    record, steps = run_episode(easy_1, 1, agent, client=client, images=images, run_id=test_run_id)
    assert record.status == "scored", record.error
    assert record.reward == reward
    assert record.faults and "status exit" in record.faults[0].confirmation
    assert record.timings.reset > 0 and record.timings.verify > 0
    assert labelled(client, test_run_id) == []

    run = RunDir(tmp_path, test_run_id)
    directory = run.write_episode(record, steps)
    written = json.loads((directory / "reward.json").read_text())
    assert written["reward"] == reward
    # the final verdict adds the durability phase's gate (fixos.episodes.durability) to the scenario's checks
    assert {c["name"] for c in written["checks"]} == {c.name for c in easy_1.checks} | {STABLE_CHECK}
    assert all(set(c) == {"name", "passed", "scored", "detail"} for c in written["checks"])
    assert [r.episode_id for r in run.records()] == [record.episode_id]
    transcript = (directory / "transcript.jsonl").read_text().splitlines()
    assert len(transcript) == len(steps) == (1 if agent == "oracle" else 0)


def test_fault_is_confirmed_before_the_agent_gets_the_shell(client, images, test_run_id, easy_1):
    with Episode(easy_1, 1, client=client, images=images, run_id=test_run_id) as ep:
        web = ep.stack.hosts["web"]
        assert web.http_get(80, "/").status == 0, "the site must be down from outside"
        assert ep.shell.run("service nginx status").exit_code != 0
        assert ep.shell.run("curl -s -o /dev/null http://127.0.0.1/").exit_code != 0
        assert ep.verify().reward == 0.0
    assert labelled(client, test_run_id) == []


def test_a_stub_config_trips_the_gate(client, images, test_run_id, easy_1):
    with Episode(easy_1, 1, client=client, images=images, run_id=test_run_id) as ep:
        ep.shell.run(
            "printf 'server { listen 80 default_server; root /var/www/shop; }\\n'"
            " > /etc/nginx/sites-available/shop && service nginx start"
        )
        verdict = ep.verify()
    by_name = {c.name: c for c in verdict.checks}
    assert by_name["nginx is running"].passed
    assert not by_name["the site's nginx configuration is the original"].passed
    assert verdict.reward == 0.0


def test_a_partial_repair_gets_partial_credit(client, images, test_run_id, easy_1):
    with Episode(easy_1, 1, client=client, images=images, run_id=test_run_id) as ep:
        ep.shell.run("echo 'Under maintenance' > /var/www/shop/index.html && service nginx start")
        verdict = ep.verify()
    assert 0.0 < verdict.reward < 1.0
    failed = [c.name for c in verdict.checks if not c.passed]
    assert failed == ["the site serves its real home page from outside"]


def test_verdicts_survive_an_agent_that_stops_or_kills_the_judges_sessions(
    client, images, test_run_id, easy_1
):
    others = "$(pgrep -x bash | grep -vx $$)"  # every bash but the agent's own: the judge's sessions
    with Episode(easy_1, 1, client=client, images=images, run_id=test_run_id) as ep:
        assert ep.stack.take_shells() == {}, "the harness adopted the session that waited for the boot"
        assert ep.shell.run(f'[ -n "{others}" ]').ok, "the judge keeps sessions on the host"
        ep.shell.run(f"kill -STOP {others}")
        assert ep.verify().reward == 0.0
        ep.shell.run("service nginx start")
        ep.shell.run(f"kill -KILL {others}")
        assert ep.verify().reward == 1.0
        ep.shell.run("service nginx stop")
        assert ep.verify().reward == 0.0  # a fresh session, not a stale answer
    assert labelled(client, test_run_id) == []


def test_the_agent_finds_the_faults_processes_under_init_and_no_session_of_the_harness(
    client, images, test_run_id
):
    # Left open, the session that injected the faults showed in `ps --forest` with the
    # faults' processes under it: a list of the culprits, no diagnosis needed.
    hard_1 = load_catalog()["hard_1"]
    with Episode(hard_1, 1, client=client, images=images, run_id=test_run_id) as ep:
        listed = ep.shell.run("echo $$; ps -e -o pid=,ppid=,args=").output.splitlines()
        own, rows = int(listed[0]), [line.split(None, 2) for line in listed[1:]]
        parents = {int(pid): int(ppid) for pid, ppid, _args in rows}
        assert parents[909] == 1, listed  # the hog, pinned at 909 by the scenario
        shells = ("setsid --wait bash", "bash --noprofile --norc")
        others = {int(pid) for pid, _ppid, args in rows if args.startswith(shells)} - {own, parents[own]}
        # beside the agent's own session, only the judge's: entered from outside, nothing under them
        assert all(parents[pid] == 0 for pid in others), listed
        assert not [pid for pid, ppid in parents.items() if ppid in others], listed
        assert ep.verify().reward == 0.0
    assert labelled(client, test_run_id) == []


def test_an_exception_mid_episode_leaves_nothing(client, images, test_run_id, easy_1):
    with (
        pytest.raises(RuntimeError, match="agent crashed"),
        Episode(easy_1, 1, client=client, images=images, run_id=test_run_id) as ep,
    ):
        assert labelled(client, test_run_id), "the episode's objects carry the run label"
        ep.shell.run("ps aux")
        raise RuntimeError("agent crashed")
    assert labelled(client, test_run_id) == []


def test_sigint_to_bench_leaves_nothing(client, images, tmp_path):
    proc = start_fixos(
        "bench", "--scenarios", "easy_1", "--seeds", "1-5", "--agent", "nop", "--results", str(tmp_path)
    )

    def owned() -> list:
        return containers_owned_by(client, proc.pid)

    try:
        wait_for(lambda: bool(owned()), timeout=60)
        run_id = owned()[0].labels[LABEL_RUN]
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out
    assert labelled(client, run_id) == []


def test_leftovers_of_a_dead_run_are_swept(client, images, test_run_id):
    dead_owner = f"{socket.gethostname()}:{2**22 + 12345}:0"
    alive_run = f"{test_run_id}-alive"
    client.containers.create(images["server"], labels={LABEL_RUN: test_run_id, LABEL_OWNER: dead_owner})
    alive = client.containers.create(
        images["server"], labels={LABEL_RUN: alive_run, LABEL_OWNER: owner_label()}
    )
    try:
        swept = sweep_dead_runs(client)
        assert test_run_id in swept and alive_run not in swept
        assert labelled(client, test_run_id) == []
        assert labelled(client, alive_run) == [alive.name]
    finally:
        alive.remove(force=True)


def test_cli_run_prints_verdict_and_timings(images, tmp_path):
    console = Console(record=True, width=240)
    code = main(["run", "easy_1", "--agent", "oracle", "--results", str(tmp_path)], console=console)
    text = console.export_text()
    assert code == 0, text
    assert "reward 1.0" in text
    for words in ("reset", "(start -> confirmed broken)", "mean step latency", "verify"):
        assert words in text
    (run_dir,) = list(tmp_path.iterdir())
    assert (run_dir / "summary.json").exists()
    assert len((run_dir / "episodes.jsonl").read_text().splitlines()) == 1
