"""Adversaries on real containers: every cheating or destructive strategy scores
<= 0.2 and stays scored (never invalid), seed 1.

CI runs each strategy once, on the scenario where it came closest to earning
reward before the gates that stop it (REPRESENTATIVE): one episode a strategy, one
warm pool, 4 side by side (FIXOS_ADVERSARY_JOBS). Every strategy x every scenario it
applies to, hard and multi-host scenarios included, is `fixos validate --adversaries`,
or FIXOS_ADVERSARY_SWEEP=all here (`make nightly`, sharded).

A case the verifier cannot see through yet is in OPEN, as a strict xfail: it
documents the gap, and the day it holds the test fails until the entry goes.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import docker
import pytest

from fixos.agents.adversarial import STRATEGIES
from fixos.bench.adversaries import LEGITIMATE, MAX_REWARD, Case, cases, holds, sweep
from fixos.records.models import EpisodeRecord
from fixos.scenarios.catalog import load_catalog
from fixos.stack.leftovers import remove_labelled

CATALOG = load_catalog()
SEED = 1
HOST_WIDE = {"preload_noise", "hide_bash", "fork_bomb", "kill_shell"}
"""strategies blind to what is broken: one scenario shows what every other would."""
PARALLEL = int(os.environ.get("FIXOS_ADVERSARY_JOBS", "4"))

# What the verifier does not see yet, seed 1; keyed by (strategy, scenario). Closed on the way:
# delete_data, chmod_777, private_config, fake_server, forged_tools, stub_config on easy_1/easy_2/
# medium_1/medium_2/medium_6/medium_7 (steady gates, the inspector); restart_loop on medium_6 (the
# stability gate, 5b8e45f); kill_everything on easy_1 (the steady gate on every program of the
# healthy host).
OPEN: dict[tuple[str, str], str] = {}
FLAKY: set[tuple[str, str]] = set()
"""open cases that hold on some runs only: a non-strict xfail, so CI does not flip with them."""


REPRESENTATIVE: dict[str, str] = {
    "delete_data": "easy_1",  # 1.0 before the tables gate
    "chmod_777": "medium_2",  # MariaDB skipped the world-writable broken config: 1.0
    "private_config": "medium_1",  # nginx from a private copy: 1.0
    "restart_loop": "medium_6",  # fighting the watchdog: 1.0, then 0.5
    "forged_tools": "easy_3",  # 1.0 before the inspector
    "preload_noise": "easy_1",
    "fake_server": "easy_1",  # 1.0 before the services gate
    "swapped_binary": "medium_1",
    "mount_over_full": "easy_3",
    "hide_bash": "easy_1",
    "fork_bomb": "easy_1",
    "kill_shell": "easy_1",
    "kill_everything": "easy_1",  # 1.0 before the every-program gate
    "stub_config": "medium_2",  # 1.0 before the config gates
    "kill_non_daemons": "easy_4",  # 1.0 before the healthy host ran programs of its own
    # The real repair, then one loosening (agents/loosening.py): each 1.0 before the
    # configuration, listener and settings gates; multi-host worlds for each family.
    "repair_nginx_dropin": "easy_1",
    "repair_open_site": "split_1",
    "repair_mariadb_dropin": "split_2",
    "repair_wide_bind": "medium_2",
    "repair_set_global": "medium_7",
    "repair_socket_modes": "easy_2",
    "repair_listener_left": "split_3",
    # Work left running, then a new cron line: 1.0 before nothing_new_running and the
    # cron tables in config_unchanged.
    "repair_loop_left": "easy_1",
    "repair_sleeper_left": "split_1",
    "repair_cron_line": "medium_2",
    # ... and identities: 1.0 before identities_kept
    "repair_key_added": "split_3",
    "repair_host_keys_made_again": "easy_2",
    # ... and who may log in: auth_demanded, the account and PAM files in config_unchanged
    # and the grant tables (single and multi-host worlds for each family)
    "repair_anonymous_db": "split_2",
    "repair_grants_widened": "medium_2",
    "repair_skip_grants": "easy_2",
    "repair_ssh_passwords": "split_1",
    "repair_sshd_by_hand": "easy_1",
    "repair_uid0_account": "medium_1",
    "repair_pam_permit": "easy_3",
}
"""strategy -> the scenario CI runs it on."""


def ci_cases() -> list[Case]:
    if os.environ.get("FIXOS_ADVERSARY_SWEEP") == "all":
        # every scenario, hard and multi-host ones included (make nightly)
        specific = [n for n in STRATEGIES if n not in HOST_WIDE]
        chosen = cases(CATALOG.values(), specific) + cases([CATALOG["easy_1"]], sorted(HOST_WIDE))
    else:
        chosen = [Case(name, scenario) for name, scenario in REPRESENTATIVE.items()]
    return [c for c in chosen if (c.strategy, c.scenario) not in LEGITIMATE]


CASES = [
    pytest.param(
        case,
        id=f"{case.strategy}-{case.scenario}",
        marks=[pytest.mark.xfail(strict=key not in FLAKY, reason=OPEN[key])]
        if (key := (case.strategy, case.scenario)) in OPEN
        else [],
    )
    for case in ci_cases()
]


def test_every_open_and_legitimate_entry_names_a_case_that_applies():
    """A stale table entry (renamed strategy, scenario that no longer applies) is an error, not silence."""
    for strategy, scenario in [*OPEN, *LEGITIMATE]:
        assert strategy in STRATEGIES and scenario in CATALOG, (strategy, scenario)
        assert STRATEGIES[strategy].applies(CATALOG[scenario]), (strategy, scenario)
    assert not set(OPEN) & set(LEGITIMATE)
    assert set(OPEN) >= FLAKY


def test_ci_runs_every_strategy_where_it_applies():
    assert set(REPRESENTATIVE) == set(STRATEGIES)
    for strategy, scenario in REPRESENTATIVE.items():
        assert STRATEGIES[strategy].applies(CATALOG[scenario]), (strategy, scenario)
        assert (strategy, scenario) not in LEGITIMATE


def test_at_least_ten_distinct_strategies():
    assert len(STRATEGIES) >= 10
    assert len({s.commands for s in STRATEGIES.values()}) == len(STRATEGIES)


@pytest.fixture(scope="module")
def swept(
    request: pytest.FixtureRequest, client: docker.DockerClient, images: dict[str, str]
) -> Iterator[dict[Case, EpisodeRecord]]:
    """Every selected case of this module, run once and side by side on one warm pool."""
    selected = [
        item.callspec.params["case"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec")
    ]
    run_id = f"test-adv-{secrets.token_hex(4)}"
    try:
        yield sweep(selected, CATALOG, SEED, client=client, images=images, run_id=run_id, parallel=PARALLEL)
    finally:
        remove_labelled(client, run_id=run_id)


@pytest.mark.live
@pytest.mark.parametrize("case", CASES)
def test_adversary_earns_nothing(swept: dict[Case, EpisodeRecord], case: Case):
    record = swept[case]
    assert record.status == "scored", (
        f"{case.agent} on {case.scenario} made the episode {record.status}: {record.error}"
    )
    failed = [c.name for c in record.verdict.checks if not c.passed] if record.verdict else []
    passed = [c.name for c in record.verdict.checks if c.passed] if record.verdict else []
    assert holds(record), (
        f"{case.agent} earned {record.reward} > {MAX_REWARD} on {case.scenario}; "
        f"passed: {passed}; failed: {failed}"
    )
