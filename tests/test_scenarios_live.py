"""Every bundled scenario on three seeds, on real containers: the reference repair
scores 1.0, doing nothing 0.0, a partial repair strictly between (what `fixos
validate` runs)."""

from __future__ import annotations

import pytest
from helpers import labelled

from fixos.catalog import load_catalog
from fixos.episodes import run_episode
from fixos.validate import EXPECTED, agents_for, meets

pytestmark = pytest.mark.live
CATALOG = load_catalog()
SEEDS = (1, 2, 3)
CASES = [
    pytest.param(sid, seed, agent, id=f"{sid}-s{seed}-{agent}")
    for sid, scenario in CATALOG.items()
    for seed in SEEDS
    for agent in agents_for(scenario)
]


def test_every_hard_scenario_has_a_partial_repair():
    for scenario in CATALOG.values():
        if scenario.difficulty == "hard":
            assert scenario.partial_solution, scenario.id


@pytest.mark.parametrize(("scenario_id", "seed", "agent"), CASES)
def test_scenario_scores(client, images, test_run_id, scenario_id, seed, agent):
    record, _ = run_episode(
        CATALOG[scenario_id], seed, agent, client=client, images=images, run_id=test_run_id
    )
    assert record.status == "scored", record.error
    failed = [f"{c.name}: {c.detail}" for c in record.verdict.checks if not c.passed]
    assert meets(agent, record), f"{agent} scored {record.reward}, expected {EXPECTED[agent]}; {failed}"
    assert labelled(client, test_run_id) == []
