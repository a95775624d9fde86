"""Diagnosis on live hosts: the oracle's report scores 1.0, none 0.0, the shotgun at most 0.3,
beside the repair's reward, on a world of each family (the nightly sweep: every scenario);
and an external agent's report handed over by `fixos verify --report`."""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor

import pytest

from fixos.episodes.episode import run_episode
from fixos.scenarios.catalog import load_catalog
from fixos.stack.leftovers import remove_labelled
from fixos.stack.pool import HostPool

CATALOG = load_catalog()
WORLDS = ("easy_1", "split_2", "net_1", "tls_1", "gen:4:1")
"""one host, three hosts, the network family, TLS, a generated world of three faults"""
EXPECTED = {"oracle": (1.0, 1.0), "nop": (0.0, 0.0), "shotgun": (0.0, 0.3)}
"""agent -> (its reward, its diagnosis at most; the oracle's exactly)"""


@pytest.mark.live
def test_oracle_nop_and_shotgun_diagnoses_beside_their_repairs(client, images):
    run_id = f"test-diag-{secrets.token_hex(4)}"
    cases = [(w, a) for w in WORLDS for a in EXPECTED]
    pool = HostPool(client, images, run_id=run_id, size=2, planned=[CATALOG[w].hosts for w, _ in cases])
    try:
        with ThreadPoolExecutor(max_workers=2) as workers:
            records = dict(
                zip(
                    cases,
                    workers.map(
                        lambda c: run_episode(
                            CATALOG[c[0]], 1, c[1], client=client, images=images, run_id=run_id, pool=pool
                        )[0],
                        cases,
                    ),
                    strict=True,
                )
            )
    finally:
        pool.close()
        remove_labelled(client, run_id=run_id)
    for (world, agent), record in records.items():
        reward, most = EXPECTED[agent]
        assert record.status == "scored" and record.reward == reward, (world, agent, record.error)
        assert record.diagnosis is not None
        if agent == "oracle":
            assert record.diagnosis.score == 1.0 and record.diagnosis.source == "agent", (
                world,
                record.diagnosis,
            )
        elif agent == "nop":
            assert record.diagnosis.score == 0.0 and record.diagnosis.source == "none"
        else:
            assert 0.0 <= record.diagnosis.score <= most and record.diagnosis.source == "agent", world
        assert len(record.diagnosis.per_fault) == len(CATALOG[world].faults)
