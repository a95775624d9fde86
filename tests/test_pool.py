"""The warm pool: booted hosts handed to episodes, spares within the plan, nothing left behind."""

from __future__ import annotations

import collections
import functools
import ipaddress
import subprocess
import threading
import time

import pytest
from helpers import labelled, wait_for

from fixos.core.errors import FixOSError, StackError
from fixos.episodes.episode import Episode, run_episode
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.schema import HostSpec
from fixos.stack.hosts import Stack
from fixos.stack.judge import LABEL_ROLE, ROLE
from fixos.stack.networks import EpisodeNetworks, bridge_device
from fixos.stack.pool import HostPool, shape_of


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def _containers(client, run_id: str) -> list:
    """The run's hosts (its judge, started with the pool, is no host)."""
    found = client.containers.list(all=True, filters={"label": f"fixos.run={run_id}"}, ignore_removed=True)
    return [c for c in found if c.labels.get(LABEL_ROLE) != ROLE]


class _PaperStack:
    """A stack that boots at once and holds nothing: for the pool's bookkeeping alone."""

    def __init__(self, hosts: list[HostSpec]) -> None:
        self.specs = hosts

    def up(self) -> None:
        return None

    def claim(self, episode_id: str) -> None:
        return None

    def down(self) -> None:
        return None


def test_spares_follow_the_next_takes_of_the_plan_whatever_the_number_of_shapes(monkeypatch) -> None:
    one, three = [HostSpec(name="web")], [HostSpec(name="web", role="web"), HostSpec(name="app", role="app")]
    three.append(HostSpec(name="db", role="db"))
    caps = [HostSpec(name="web", caps=["NET_ADMIN"])]
    monkeypatch.setattr(HostPool, "_new_stack", lambda self, hosts, episode_id: _PaperStack(hosts))
    plan = [one, one, three, caps, caps, caps, three]
    with HostPool(None, {}, run_id="paper", size=2, planned=plan) as pool:  # type: ignore[arg-type]
        wait_for(lambda: pool.ready_count(one) == 2, timeout=10)
        time.sleep(0.2)  # a pool that kept spares per shape would have booted more by now
        assert pool.ready_count() == 2, "spares stay the run's parallelism in all, not per shape"
        pool.take(one, "a")
        wait_for(lambda: pool.ready_count(three) == 1, timeout=10)
        assert pool.ready_count() == 2 and pool.ready_count(one) == 1
        pool.take(one, "b")
        pool.take(three, "c")
        wait_for(lambda: pool.ready_count(caps) == 2, timeout=10)
        time.sleep(0.2)
        assert pool.ready_count() == 2


@pytest.mark.live
def test_pool_keeps_spares_hands_them_over_renamed_and_removes_everything(client, images, test_run_id):
    web = [HostSpec(name="web")]
    with HostPool(client, images, run_id=test_run_id, size=2, shapes=[web]) as pool:
        wait_for(lambda: pool.ready_count() == 2, timeout=120)
        started = time.monotonic()
        stack = pool.take(web, "easy_1-s1-nop")
        taken_in = time.monotonic() - started
        assert taken_in < 1.0  # a handover, not a boot (a boot here takes > 1 s)
        (container,) = [
            c for c in _containers(client, test_run_id) if c.id == stack.hosts["web"].handle.container_id
        ]
        assert container.name == f"fixos-{test_run_id}-easy_1-s1-nop-web"
        assert container.status == "running"
        with stack.hosts["web"].shell() as shell:
            assert shell.run("curl -fsS -o /dev/null http://127.0.0.1/ && service mariadb status").ok
        # the session that waited for the boot comes along, once, for the harness
        (name, boot_shell), *more = stack.take_shells().items()
        assert name == "web" and not more and stack.take_shells() == {}
        assert boot_shell.run('echo $PWD; [ -z "$PS1" ]').output.strip() == "/root"
        boot_shell.close()
        # the pool refills to its size while the taken stack is in use
        wait_for(lambda: pool.ready_count() == 2, timeout=120)
        assert len(_containers(client, test_run_id)) == 3
        pool.discard(stack)
    assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_a_retry_takes_its_name_from_the_first_attempt_still_being_removed(client, images, test_run_id):
    """bench runs a failed episode again under the same id while the pool removes the first
    attempt in the background: the second claim must not fail on the name (409)."""
    web = [HostSpec(name="web")]
    with HostPool(client, images, run_id=test_run_id, size=2, shapes=[web]) as pool:
        first = pool.take(web, "split_1-s1-nop")
        first_id = first.hosts["web"].handle.container_id
        second = pool.take(web, "split_1-s1-nop")  # the retry, before the first is gone
        names = {c.id: c.name for c in _containers(client, test_run_id)}
        assert names[second.hosts["web"].handle.container_id] == f"fixos-{test_run_id}-split_1-s1-nop-web"
        assert names[first_id].startswith(f"fixos-{test_run_id}-split_1-s1-nop-web-gone-")
        pool.discard(first)
        pool.discard(second)
    assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_the_plan_bounds_spares_and_a_taker_beyond_it_still_gets_a_host(client, images, test_run_id):
    web = [HostSpec(name="web")]
    with HostPool(client, images, run_id=test_run_id, size=3, planned=[web]) as pool:
        wait_for(lambda: pool.ready_count() == 1, timeout=120)
        time.sleep(2)  # more boots would have started by now
        assert len(_containers(client, test_run_id)) == 1
        first = pool.take(web, "one")
        second = pool.take(web, "retry")  # beyond the plan: booted for the taker
        assert first.hosts["web"].handle.container_id != second.hosts["web"].handle.container_id
        pool.discard(first)
        pool.discard(second)
    assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_warm_episodes_score_like_cold_ones_and_reuse_the_healthy_baseline(
    client, images, test_run_id, catalog
):
    easy_2 = catalog["easy_2"]
    with HostPool(client, images, run_id=test_run_id, size=1, shapes=[easy_2.hosts]) as pool:
        rewards = {}
        for agent in ("oracle", "nop", "oracle"):
            record, _ = run_episode(
                easy_2, len(rewards) + 1, agent, client=client, images=images, run_id=test_run_id, pool=pool
            )
            assert record.status == "scored", record.error
            rewards[f"{agent}{len(rewards)}"] = record.reward
        assert rewards == {"oracle0": 1.0, "nop1": 0.0, "oracle2": 1.0}
        # a record per check, made on the first healthy host and reused after (no more appear)
        assert len(pool.baselines) == len(easy_2.checks)
    assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_a_stack_takes_the_empty_network_a_removed_one_left_and_the_run_removes_it(
    client, images, test_run_id
):
    """A pool's stacks pass their networks on (``EpisodeNetworks``): making and removing a
    bridge is the engine's iptables work at every episode."""
    networks = EpisodeNetworks(client, keep=True)
    label = {"label": f"fixos.run={test_run_id}"}

    def stack(name: str) -> Stack:
        web = [HostSpec(name="web")]
        return Stack(client, run_id=test_run_id, episode_id=name, hosts=web, images=images, networks=networks)

    try:
        with stack(f"{test_run_id}-a") as first:
            first.up()
            (made,) = client.networks.list(filters=label)
            # what a host's root could leave by answering ARP for an address: a wrong MAC
            device = bridge_device(made)
            subnet = made.attrs["IPAM"]["Config"][0]["Subnet"]
            address = str(ipaddress.ip_network(subnet)[200])
            for state in ("stale", "permanent"):
                poison = ["ip", "neigh", "replace", address, "lladdr", "02:00:00:00:00:01"]
                subprocess.run([*poison, "dev", device, "nud", state], check=True)
                address = str(ipaddress.ip_network(subnet)[201])
            assert subprocess.run(["ip", "neigh", "show", "dev", device], capture_output=True).stdout
        assert [n.id for n in client.networks.list(filters=label)] == [made.id]  # kept, empty
        left = subprocess.run(["ip", "neigh", "show", "dev", device], capture_output=True, text=True)
        assert left.returncode == 0 and left.stdout == "", left.stdout  # forgotten before it is passed on
        with stack(f"{test_run_id}-b") as second:
            second.up()
            attached = client.containers.get(second.hosts["web"].handle.container_id)
            assert list(attached.attrs["NetworkSettings"]["Networks"]) == [made.name]
            assert second.hosts["web"].shell(default_timeout=10).run("getent hosts web").ok
    finally:
        networks.close()
    assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_a_shape_the_pool_does_not_keep_is_booted_for_the_taker_under_the_runs_name(
    client, images, test_run_id
):
    with HostPool(client, images, run_id=test_run_id, size=1, shapes=[[HostSpec(name="web")]]) as pool:
        other = [HostSpec(name="db")]
        stack = pool.take(other, "odd-s1-nop")
        (container,) = [
            c for c in _containers(client, test_run_id) if c.id == stack.hosts["db"].handle.container_id
        ]
        assert container.name == f"fixos-{test_run_id}-odd-s1-nop-db"
        pool.discard(stack)
    assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_a_pool_of_an_unbootable_image_fails_the_taker_with_one_line(client, test_run_id):
    web = [HostSpec(name="web")]
    with HostPool(
        client, {"server": "fixos/no-such-image:0"}, run_id=test_run_id, size=1, shapes=[web]
    ) as pool:
        with pytest.raises(StackError) as caught:
            pool.take(web, "doomed")
        assert "\n" not in str(caught.value) and "no-such-image" in str(caught.value)
    assert labelled(client, test_run_id) == []


def test_an_episode_cannot_take_hosts_from_another_runs_pool(catalog):
    class Pool:
        run_id = "other"

    with pytest.raises(FixOSError, match="pool of run 'other'"):  # refused before any engine call
        Episode(catalog["easy_1"], 1, client=None, images={}, run_id="mine", pool=Pool())  # type: ignore[arg-type]


def _planned_pool(size: int, resetting: int, waiting: int, booting: int, planned: bool = True) -> HostPool:
    """A pool's bookkeeping alone (no engine, no thread): what ``_wanted`` decides from; a
    bench's has a plan of takes, a server's none."""
    hosts = [HostSpec(name="web")]
    shape = shape_of(hosts)
    pool = HostPool.__new__(HostPool)
    pool.size, pool._specs, pool._plan = size, {shape: hosts}, [shape] * 12 if planned else None
    pool._ready = {shape: collections.deque()}
    pool._booting, pool._waiting = {shape: booting}, {shape: waiting}
    pool._resetting, pool._lock = resetting, threading.Condition()
    return pool


def test_a_servers_spares_wait_for_its_resets_and_a_benchs_boot_beside_them():
    """A server's spares wait while resets work (a boot would slow a session's reset), but
    a reset still waiting for its stack works at nothing: at -j 4, counting it kept spares'
    boots one at a time. A bench's planned spares boot beside its resets: held back, the
    next wave waited for boots begun late."""
    server = functools.partial(_planned_pool, planned=False)
    assert server(4, resetting=2, waiting=0, booting=1)._wanted() is None  # resets at work
    assert server(4, resetting=1, waiting=1, booting=1)._wanted() is not None  # only waiting
    assert server(4, resetting=3, waiting=1, booting=1)._wanted() is None  # two at work
    assert server(4, resetting=0, waiting=0, booting=1)._wanted() is not None  # quiet: spares
    assert _planned_pool(4, resetting=2, waiting=0, booting=1)._wanted() is not None  # beside resets
    assert _planned_pool(4, resetting=3, waiting=1, booting=1)._wanted() is not None
    assert _planned_pool(4, resetting=0, waiting=0, booting=4)._wanted() is None  # enough booting
    assert _planned_pool(4, resetting=4, waiting=0, booting=4)._wanted() is None


def test_a_network_given_back_is_kept_only_while_a_planned_take_has_no_stack_yet():
    """The run's last networks are removed as their stacks go, beside the last episodes,
    not all at close (the engine removes one at a time: 4 took 1.6 s of a bench of 8)."""
    pool = _planned_pool(4, resetting=0, waiting=0, booting=4)
    assert pool._network_wanted()  # 12 takes planned, 4 stacks booting
    pool._plan = pool._plan[:4]
    assert not pool._network_wanted()  # each planned take has its stack booting
    pool._booting = dict.fromkeys(pool._booting, 3)
    assert pool._network_wanted()  # one take still needs a boot
    pool._plan = None
    assert pool._network_wanted()  # no plan: an OpenEnv server's pool keeps them all
