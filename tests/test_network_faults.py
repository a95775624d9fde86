"""Network faults between the shop's hosts, live on one shared 3-host stack
(web -> app -> db, NET_ADMIN on app and db): each fault breaks the order page
and its confirmation sees the fault itself; the network checks, run from an
inspector in the app host's namespaces, fail while it is in and pass once its
``undo`` ran; flushing every rule of the db host fails ``firewall_kept``; a
host without NET_ADMIN refuses the faults that need it.
"""

from __future__ import annotations

import time

import pytest
from helpers import booted_stack, inspector_probe

from fixos.core.errors import InvalidEpisode
from fixos.injector import FAULTS
from fixos.injector.base import fault_rng
from fixos.scenarios.schema import HostSpec
from fixos.verifier import CHECKS

pytestmark = pytest.mark.live

RUN_ID = "test-network-faults"
MULTI_HOST_FAULTS = ["firewall_blocks", "db_bind_local", "db_host_wrong", "link_throttled"]
"""fault types tested here (not in test_faults.py's one-host CASES)."""


@pytest.fixture(scope="module")
def stack(client, images):
    hosts = [
        HostSpec(name="web", role="web"),
        HostSpec(name="app", role="app", caps=["NET_ADMIN"]),
        HostSpec(name="db", role="db", caps=["NET_ADMIN"]),
    ]
    with booted_stack(client, images, RUN_ID, hosts) as stack:
        yield stack


@pytest.fixture(scope="module")
def app_probe(client, images, stack):
    with inspector_probe(client, stack.hosts["app"], images["inspector"]) as probe:
        yield probe


@pytest.fixture(scope="module")
def db_probe(client, images, stack):
    with inspector_probe(client, stack.hosts["db"], images["inspector"]) as probe:
        yield probe


def check(type_name: str, **params):
    cls = CHECKS.get(type_name)
    return cls(cls.Params.model_validate(params))


def page_ok(stack) -> bool:
    page = stack.hosts["web"].http_get(80, "/status", timeout=8)
    return page.status == 200 and b"orders: 10" in page.body


def wait_page(stack, ok: bool, timeout: float = 20) -> bool:
    deadline = time.monotonic() + timeout
    while page_ok(stack) != ok:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.3)
    return True


def seed_for(fault_type: str, first_draw) -> int:
    """The first seed whose first draw is ``first_draw`` (each fault's first rng draw is its variant)."""
    for seed in range(1, 200):
        rng = fault_rng(seed, 0, fault_type)
        if first_draw(rng):
            return seed
    raise AssertionError(f"no seed for {fault_type}")


def break_and_repair(stack, probe, fault_type, host, seed, path_check=True):
    fault = FAULTS.get(fault_type)(FAULTS.get(fault_type).Params())
    reachable = check("db_reachable")
    with stack.hosts[host].shell() as shell:
        seeded = fault.inject(shell, fault_rng(seed, 0, fault_type))
        try:
            confirmed = fault.confirm(shell)
            assert confirmed.passed, (seeded, confirmed.detail)
            assert wait_page(stack, ok=False), seeded
            if path_check:
                failed = reachable.evaluate(probe, None)
                assert not failed.passed, (seeded, failed.detail)
        finally:
            assert shell.run(seeded["undo"], timeout=90).ok, seeded
    assert wait_page(stack, ok=True, timeout=30), seeded
    repaired = reachable.evaluate(probe, None)
    assert repaired.passed, (seeded, repaired.detail)
    return seeded


def test_healthy_path_passes_the_network_checks(stack, app_probe):
    assert page_ok(stack)
    assert check("db_reachable").evaluate(app_probe, None).passed
    qdisc = check("qdisc_unchanged")
    assert qdisc.evaluate(app_probe, qdisc.snapshot(app_probe)).passed
    kept = check("firewall_kept")
    assert kept.evaluate(app_probe, kept.refine(app_probe, kept.snapshot(app_probe))).passed


@pytest.mark.parametrize("seed", [1, 3, 10])  # REJECT chain legacy, DROP chain, DROP INPUT legacy
def test_firewall_blocks_then_its_undo(stack, app_probe, seed):
    seeded = break_and_repair(stack, app_probe, "firewall_blocks", "db", seed)
    with stack.hosts["db"].shell() as shell:
        shell.run("iptables -P INPUT ACCEPT && iptables -F INPUT", timeout=10)
    assert seeded["action"] in ("DROP", "REJECT")


def test_a_dropped_syn_fails_db_reachable_at_once_as_held(stack, app_probe):
    """the connect is made from this machine in app's namespace: a SYN db drops is given up
    after 0.5 s as held by the network, not waited for the check's 3 s"""
    drop = "iptables -I INPUT -p tcp --dport 3306 -j DROP"
    with stack.hosts["db"].shell() as shell:
        assert shell.run(drop, timeout=10).ok
        try:
            failed = check("db_reachable").evaluate(app_probe, None)
        finally:
            assert shell.run(drop.replace("-I", "-D"), timeout=10).ok
    assert not failed.passed and "its SYN unanswered over 0.5 s (held by the network)" in failed.detail, (
        failed
    )
    assert check("db_reachable").evaluate(app_probe, None).passed


def test_firewall_flushed_loses_the_hardening(stack, app_probe):
    fault = FAULTS.get("firewall_blocks")(FAULTS.get("firewall_blocks").Params())
    kept = check("firewall_kept")
    with stack.hosts["db"].shell() as shell:
        seeded = fault.inject(shell, fault_rng(1, 0, "firewall_blocks"))
        try:
            evidence = kept.refine(app_probe, kept.snapshot(app_probe))
            assert evidence, "the baseline filters the probed ports"
            assert shell.run(seeded["undo"]).ok  # the honest repair keeps the hardening
            assert check("db_reachable").evaluate(app_probe, None).passed
            assert kept.evaluate(app_probe, evidence).passed
            flush = "iptables -P INPUT ACCEPT && iptables -F && iptables -X && iptables-legacy -F"
            assert shell.run(flush).ok
            lost = kept.evaluate(app_probe, evidence)
            assert not lost.passed and "no longer filters" in lost.detail, lost.detail
        finally:
            shell.run("iptables -P INPUT ACCEPT; iptables -F; iptables-legacy -F; true")


@pytest.mark.parametrize("line", ["bind-address = 127.0.0.1", "skip-networking"])
def test_db_bind_local(stack, app_probe, line):
    seed = seed_for("db_bind_local", lambda r: (r.choice([0, 1, 2]), r.choice(["b", "b", "s"]))[1] == line[0])
    seeded = break_and_repair(stack, app_probe, "db_bind_local", "db", seed)
    assert seeded["line"] == line


@pytest.mark.parametrize("variant", ["hosts", "app_ini", "resolv"])
def test_db_host_wrong(stack, app_probe, variant):
    seed = seed_for("db_host_wrong", lambda r: r.choice(["hosts", "app_ini", "resolv"]) == variant)
    # the app's own settings (app.ini) are not the path a connect to db:3306 takes
    seeded = break_and_repair(stack, app_probe, "db_host_wrong", "app", seed, path_check=variant == "hosts")
    assert seeded["variant"] == variant


def test_link_throttled(stack, app_probe, db_probe):
    """on db, as net_5 has it: only MariaDB's port is shaped, so ssh and ARP still pass"""
    qdisc = check("qdisc_unchanged")
    healthy = qdisc.snapshot(db_probe)
    fault = FAULTS.get("link_throttled")(FAULTS.get("link_throttled").Params())
    with stack.hosts["db"].shell() as shell:
        seeded = fault.inject(shell, fault_rng(1, 0, "link_throttled"))
        try:
            assert fault.confirm(shell).passed
            shaped = qdisc.evaluate(db_probe, healthy)
            assert not shaped.passed and "htb" in shaped.detail, shaped.detail
            assert wait_page(stack, ok=False), "the order page still loads through the throttle"
            ssh = shell.run("ssh -o BatchMode=yes -o ConnectTimeout=10 web true", timeout=30)
            assert ssh.ok, f"ssh is shaped too: {ssh.output}"
        finally:
            assert shell.run(seeded["undo"]).ok
    assert qdisc.evaluate(db_probe, healthy).passed
    assert wait_page(stack, ok=True, timeout=30)


def test_faults_needing_net_admin_refuse_without_it(stack):
    with stack.hosts["web"].shell() as shell:
        for fault_type in ("firewall_blocks", "link_throttled"):
            fault = FAULTS.get(fault_type)(FAULTS.get(fault_type).Params())
            with pytest.raises(InvalidEpisode, match="NET_ADMIN"):
                fault.inject(shell, fault_rng(1, 0, fault_type))
