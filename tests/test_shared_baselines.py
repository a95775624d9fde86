"""Why a warm pool may record a scenario's healthy evidence once and reuse it on every host
of the same image and shape (``HostPool.baselines``, ``Episode._cached_healthy``): two hosts
booted apart from one image give the same evidence to every check the one-host scenarios
use. And why a server's reset may show the confirmation's verdict as the step-0 score: it is
what judging the broken host again says."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
from helpers import labelled

from fixos.episodes.episode import Episode
from fixos.episodes.inspection import inspected
from fixos.episodes.phases import check_entries
from fixos.scenarios.catalog import load_catalog
from fixos.stack.pool import HostPool, shape_of
from fixos.verifier import CheckEntry, judge
from fixos.verifier.verify import refine

CATALOG = load_catalog()
ONE_WEB_HOST = shape_of(CATALOG["easy_1"].hosts)


def every_one_host_check() -> list[CheckEntry]:
    """Every distinct check (type and parameters) of the scenarios on the plain one-host shape."""
    distinct: dict[str, CheckEntry] = {}
    for scenario in CATALOG.values():
        if shape_of(scenario.hosts) == ONE_WEB_HOST:
            for entry in check_entries(scenario):
                key = f"{entry.type} {entry.params!r}"
                distinct.setdefault(key, replace(entry, name=f"{scenario.id}: {entry.name}"))
    return list(distinct.values())


def healthy_evidence(client, stack, image: str, checks: list[CheckEntry]) -> dict:
    """What each check records of the healthy host, judged a scenario's worth of checks at a
    time (all at once, the host's daemons would be busier than any episode makes them)."""
    evidence = {}
    for start in range(0, len(checks), 12):
        with inspected(client, stack.hosts, image, patient=False) as looking:
            proof = judge(checks[start : start + 12], looking.probes, moment="healthy")
        failing = [c.name for c in proof.verdict.checks if not c.passed]
        assert failing == [], failing
        evidence.update(proof.baseline)
    return evidence


@pytest.mark.live
def test_hosts_booted_apart_from_one_image_give_the_same_healthy_evidence(client, images, test_run_id):
    checks = every_one_host_check()
    assert len({c.type for c in checks}) >= 15, "a sample of most check types"
    hosts = CATALOG["easy_1"].hosts
    with HostPool(client, images, run_id=test_run_id, size=2, shapes=[hosts], boots_at_once=2) as pool:
        stacks = [pool.take(hosts, f"same-{i}") for i in range(2)]
        evidence = []
        for stack in stacks:
            for shell in stack.take_shells().values():
                shell.close()
            evidence.append(healthy_evidence(client, stack, images["inspector"], checks))
        assert stacks[0].image_ids() == stacks[1].image_ids()
        # What an episode on the second host judges against: its healthy evidence as the
        # checks narrow it on that host (refine re-records what is the host's own, such as
        # the episode CA of tls_valid), from the first host's evidence (the cache) or its own.
        with inspected(client, stacks[1].hosts, images["inspector"], patient=False) as looking:
            via_cache = refine(checks, looking.probes, copy.deepcopy(evidence[0]))
            own = refine(checks, looking.probes, copy.deepcopy(evidence[1]))
        differing = sorted(k for k in own if own[k] != via_cache.get(k))
        assert differing == [], f"evidence that differs between identical hosts: {differing}"
        assert own.keys() == via_cache.keys() == evidence[0].keys()
        for stack in stacks:
            pool.discard(stack)
    assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_the_confirmations_verdict_is_what_judging_the_broken_host_again_says(client, images, test_run_id):
    scenario = CATALOG["easy_2"]
    with Episode(scenario, 2, client=client, images=images, run_id=test_run_id) as episode:
        confirmed = episode.broken_verdict
        assert confirmed is not None and not confirmed.solved
        again = episode.progress()
        assert [(c.name, c.passed) for c in again.checks] == [(c.name, c.passed) for c in confirmed.checks]
        assert again.reward == confirmed.reward
    assert labelled(client, test_run_id) == []
