"""Task levels and fault-free controls on live hosts (``fixos.episodes.tasks``): a report-only
task scores the report and zeroes anything that touched the host; a control scores the
repair that is none, and sees a service merely restarted or a file written back the same."""

from __future__ import annotations

import os
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from fixos.agents.base import Task
from fixos.agents.nop import NopAgent
from fixos.agents.oracle import OracleAgent, run_solution
from fixos.episodes.episode import run_episode
from fixos.records.failures import retry_wanted
from fixos.scenarios.catalog import load_catalog
from fixos.shells.base import Shell
from fixos.stack.leftovers import remove_labelled
from fixos.stack.pool import HostPool

CATALOG = load_catalog()
HERE = "test_tasks_live"


class Fixer(OracleAgent):
    """Repairs (whatever the task says) and reports the truth: a report-only task scores it 0."""

    name = "fixer"

    def solve(self, task: Task, shell: Shell) -> None:
        run_solution(shell, self._solution)


class WhereOnly(OracleAgent):
    """Names each fault's host and component, with a wrong cause and no evidence."""

    name = "where-only"

    def report(self) -> dict[str, Any] | None:
        assert self.truth is not None
        wrong = {"config_error": "permission"}
        findings = [
            {**f, "cause": wrong.get(f["cause"], "config_error"), "evidence": ""}
            for f in self.truth["findings"]
        ]
        return {"healthy": False, "findings": findings}


class SomethingWrong(NopAgent):
    name = "something-wrong"

    def report(self) -> dict[str, Any]:
        return {"healthy": False, "findings": []}


class Runs(NopAgent):
    """Runs one command: ``COMMAND``."""

    COMMAND = "true"

    def solve(self, task: Task, shell: Shell) -> None:
        shell.run(self.COMMAND)


class RestartOnly(Runs):
    name = "restart-only"
    COMMAND = "service nginx restart"


class RewriteOnly(Runs):
    name = "rewrite-only"
    COMMAND = "cp -p /etc/nginx/sites-available/shop /root/s && cat /root/s > /etc/nginx/sites-available/shop"


class RestartOnDb(Runs):
    name = "restart-on-db"
    COMMAND = "ssh db service mariadb restart"


class Waits(NopAgent):
    """Touches nothing for longer than the host's own background programs take between
    writes of their state (the log shipper: 30 s): what they write is not the agent's."""

    name = "waits"

    def solve(self, task: Task, shell: Shell) -> None:
        for _ in range(2):  # a command may last 30 s at most here
            shell.run("sleep 16", timeout=25)


CASES: list[tuple[str, str, str, float, float]] = [
    # world, task, agent, reward at least, reward at most
    ("hard_3", "diagnose", "oracle", 1.0, 1.0),
    ("hard_3", "diagnose", "nop", 0.0, 0.0),
    ("hard_3", "diagnose", "shotgun", 0.0, 0.3),
    ("hard_3", "diagnose", f"{HERE}:Fixer", 0.0, 0.0),
    ("split_2", "localise", f"{HERE}:WhereOnly", 1.0, 1.0),
    ("split_2", "diagnose", f"{HERE}:WhereOnly", 0.2, 0.8),
    ("easy_1", "detect", f"{HERE}:SomethingWrong", 1.0, 1.0),
    ("easy_1", "detect", "nop", 0.0, 0.0),
    ("control_1", "diagnose", "oracle", 1.0, 1.0),
    ("control_1", "repair", f"{HERE}:Waits", 1.0, 1.0),
    ("control_1", "detect", f"{HERE}:SomethingWrong", 0.0, 0.0),
    ("control_1", "repair", f"{HERE}:RestartOnly", 0.0, 0.0),
    ("control_1", "repair", f"{HERE}:RewriteOnly", 0.0, 0.0),
    ("control_2", "repair", f"{HERE}:RestartOnDb", 0.0, 0.0),
]


@pytest.mark.live
def test_task_levels_and_controls(client, images):
    run_id = f"test-task-{secrets.token_hex(4)}"
    pool = HostPool(client, images, run_id=run_id, size=2, planned=[CATALOG[c[0]].hosts for c in CASES])

    def one(case: tuple[str, str, str, float, float]) -> Any:
        world, task, agent, _, _ = case
        for _ in range(2):  # as the bench does: a harness failure (never the agent's) runs once more
            record = run_episode(
                CATALOG[world], 1, agent, client=client, images=images, run_id=run_id, pool=pool, task=task
            )[0]
            if not retry_wanted(record.failure):
                break
        return record

    try:
        with ThreadPoolExecutor(max_workers=2) as workers:
            records = list(workers.map(one, CASES))
    finally:
        pool.close()
        remove_labelled(client, run_id=run_id)
    for (world, task, agent, low, high), record in zip(CASES, records, strict=True):
        where = (world, task, agent)
        assert record.status == "scored", (where, record.error)
        assert record.task == task and record.control == (not CATALOG[world].faults)
        assert low <= record.reward <= high, (where, record.reward, record.diagnosis)
        gates = {c.name: c for c in record.verdict.checks if not c.scored}
        touched = [c for name, c in gates.items() if "as the agent found" in name and not c.passed]
        if agent.endswith(("Fixer", "RestartOnly", "RewriteOnly", "RestartOnDb")):
            assert touched, (where, "no gate saw the host touched")
        else:
            assert not touched, (where, [c.detail for c in touched])
        if agent.endswith("RestartOnly"):
            assert "nginx restarted" in touched[0].detail
        if agent.endswith("RewriteOnly"):
            assert "/etc/nginx/sites-available/shop" in touched[0].detail
        if agent.endswith("RestartOnDb"):
            assert any("mariadb restarted" in c.detail for c in touched), [c.detail for c in touched]
        if agent.endswith("Fixer"):
            assert record.diagnosis is not None and record.diagnosis.score == 1.0  # the report was right
        # report-only levels and controls are judged as left only: no restart phase
        assert record.verdict.phases.keys() == {"as_left"}


class FixerWhoClearsArchives(OracleAgent):
    """The reference repair, then the largest file under /var/log removed as well: the decoy."""

    name = "fixer-who-clears-archives"

    def solve(self, task: Task, shell: Shell) -> None:
        run_solution(shell, self._solution)
        shell.run("rm -rf /var/log/shop-archive")


@pytest.mark.live
def test_a_generated_decoy_is_part_of_the_healthy_host_and_removing_it_costs_the_reward(client, images):
    world = CATALOG["gen:4:4"]  # a port squatter, a full /var/log (the archive beside it), a cron job
    assert [h.decoys for h in world.hosts] == [["archive"]]
    run_id = f"test-decoy-{secrets.token_hex(4)}"
    pool = HostPool(client, images, run_id=run_id, size=2, planned=[world.hosts, world.hosts])
    try:
        with ThreadPoolExecutor(max_workers=2) as workers:
            oracle, careless = workers.map(
                lambda agent: run_episode(
                    world, 1, agent, client=client, images=images, run_id=run_id, pool=pool
                )[0],
                ["oracle", f"{HERE}:FixerWhoClearsArchives"],
            )
    finally:
        pool.close()
        remove_labelled(client, run_id=run_id)
    assert oracle.status == "scored" and oracle.reward == 1.0, oracle.error
    assert careless.status == "scored" and careless.reward == 0.0, careless.error
    failed = [c for c in careless.verdict.checks if not c.passed]
    assert [c.name for c in failed if "archive" in c.name] == ["last month's order archive is kept on web"]


SWEEP = os.environ.get("FIXOS_TASK_SWEEP") == "all"
AS_FOUND_WORLDS = sorted(CATALOG) if SWEEP else ["medium_4", "medium_5", "medium_7", "net_3", "gen:4:4"]
"""every scenario in the nightly sweep; in CI, worlds whose own gates judge a fault's effect
(an owner changed, MariaDB unreachable, a knock on a flooded MariaDB: as found) and a
generated world with a decoy"""


@pytest.mark.live
def test_the_oracle_that_reports_and_touches_nothing_scores_full_at_diagnose(client, images):
    run_id = f"test-asfound-{secrets.token_hex(4)}"
    pool = HostPool(
        client, images, run_id=run_id, size=2, planned=[CATALOG[w].hosts for w in AS_FOUND_WORLDS]
    )

    def one(world: str) -> Any:
        for _ in range(2):  # as the bench does: a harness failure runs once more
            record = run_episode(
                CATALOG[world],
                1,
                "oracle",
                client=client,
                images=images,
                run_id=run_id,
                pool=pool,
                task="diagnose",
            )[0]
            if not retry_wanted(record.failure):
                break
        return record

    try:
        with ThreadPoolExecutor(max_workers=2) as workers:
            records = list(workers.map(one, AS_FOUND_WORLDS))
    finally:
        pool.close()
        remove_labelled(client, run_id=run_id)
    for world, record in zip(AS_FOUND_WORLDS, records, strict=True):
        failed = [f"{c.name}: {c.detail}" for c in record.verdict.checks if not c.passed and not c.scored]
        assert record.status == "scored" and record.reward == 1.0, (world, record.error, failed)


@pytest.mark.live
def test_a_gate_failing_as_found_does_not_cut_a_page_short_at_diagnose(client, images, monkeypatch):
    """medium_5 at diagnose: the scenario's own gate on the data directory's owner fails as
    found, fast. Were that to settle the verdict (``Probe.settled``), a page still on its way
    would be given up, read as broken since the confirmation, and zero a true report (CI, once
    in many runs). Every page answers 0.5 s late here, so the gate always fails first."""
    from fixos.stack.hosts import LiveHost

    served = LiveHost.http_get

    def late(self: LiveHost, port: int, path: str, timeout: float = 5.0) -> Any:
        time.sleep(0.5)
        return served(self, port, path, timeout)

    monkeypatch.setattr(LiveHost, "http_get", late)
    run_id = f"test-late-{secrets.token_hex(4)}"
    try:
        record = run_episode(
            CATALOG["medium_5"], 1, "oracle", client=client, images=images, run_id=run_id, task="diagnose"
        )[0]
    finally:
        remove_labelled(client, run_id=run_id)
    assert record.status == "scored", record.error
    checks = {c.name: c for c in record.verdict.checks}
    gate = checks["the data directory belongs to mysql and is not world-writable"]
    pages = checks["steady: the pages are the healthy host's, from outside"]
    assert not gate.passed and pages.passed, (gate.detail, pages.detail)
    assert record.reward == 1.0, [f"{c.name}: {c.detail}" for c in record.verdict.checks if not c.passed]
