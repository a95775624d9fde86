"""Every bundled scenario on three seeds, on real containers: the reference repair
scores 1.0, doing nothing 0.0, a partial repair strictly between (what `fixos
validate` runs)."""

from __future__ import annotations

import pytest
from helpers import wait_for

from fixos.episodes import run_episode
from fixos.scenarios.catalog import load_catalog
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
def test_scenario_scores(client, images, warm_pool, scenario_id, seed, agent):
    """On warm hosts, as `fixos bench` and `fixos validate` run them (cold boots: test_episode)."""
    record, _ = run_episode(
        CATALOG[scenario_id],
        seed,
        agent,
        client=client,
        images=images,
        run_id=warm_pool.run_id,
        pool=warm_pool,
    )
    assert record.status == "scored", record.error
    failed = [f"{c.name}: {c.detail}" for c in record.verdict.checks if not c.passed]
    assert meets(agent, record), f"{agent} scored {record.reward}, expected {EXPECTED[agent]}; {failed}"
    name = f"fixos-{warm_pool.run_id}-{record.episode_id}-web"
    # removed in the background; the low-level list does not trip over one vanishing meanwhile
    wait_for(lambda: not client.api.containers(all=True, filters={"name": name}), timeout=30)
