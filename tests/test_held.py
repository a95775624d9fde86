"""A page held by the network fails on the hosts' own evidence, not after the time-outs:
unit tests of what counts as held, then live on a 3-host stack (web -> app -> db): a page
whose database SYN db drops fails within 2 s naming PHP's connection; one that hangs for
another reason while a client that is no server (as a check's port probe) waits on a
dropped SYN is left to its time-out."""

from __future__ import annotations

import shlex
import time

import pytest
from helpers import booted_stack

from fixos.core.models import Connection
from fixos.scenarios.schema import HostSpec
from fixos.verifier.base import Probe
from fixos.verifier.held import HELD_SECONDS, NetworkWatch, stall_ms
from fixos.verifier.http import FIRST_WAIT, _ask, get_page

RUN_ID = "test-held"


def conn(local="10.0.0.3:40000", remote="10.0.0.4:3306", state=2, inode=7, retransmits=0, unacked=1, **ms):
    fields = (ms.get("sent", 0), ms.get("ack", 0), ms.get("timer", 0))
    return Connection(local, remote, state, inode, retransmits, unacked, *fields)


def test_how_long_a_connection_has_waited():
    assert stall_ms(conn(timer=600)) == 600  # a SYN, by its retransmission timer
    assert stall_ms(conn(retransmits=1, timer=200)) == 1200  # sent again at 1 s
    assert stall_ms(conn(retransmits=2, timer=200)) is None  # 2 s or more: older than a look's reach
    assert stall_ms(conn(state=1, unacked=0, sent=9000, ack=9000)) is None  # idle: its peer has to speak
    established = {"state": 1, "unacked": 2, "retransmits": 1}
    assert stall_ms(conn(**established, sent=600, ack=900)) == 600  # since data last went
    assert stall_ms(conn(**established, sent=5000, ack=300)) == 300  # an ACK came 300 ms ago
    assert stall_ms(conn(state=1, unacked=2, sent=5000, ack=5000)) is None  # never timed out: TCP waits on


class FakeHost:
    """A host read from this machine: its connections now, and which servers hold which."""

    def __init__(self, connections, servers):
        self.now, self.servers = connections, servers

    def facts(self):
        return self

    def connections(self):
        return list(self.now)

    def servers_holding(self, inodes):
        return {i: self.servers[i] for i in inodes if i in self.servers}


def test_the_watch_counts_what_a_server_began_waiting_on_during_the_ask(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr("fixos.verifier.held.time.monotonic", lambda: clock[0])
    servers = {1: "php-fpm8.2", 2: "php-fpm8.2", 4: "nginx"}
    host = FakeHost([], servers)
    watch = NetworkWatch({"app": host})
    assert not watch.due()  # nothing read while the page may still answer
    clock[0] += HELD_SECONDS
    assert watch.due() and not watch.due()
    old_syn = conn(local="10.0.0.3:1", inode=1, timer=900)  # waiting since before the ask
    client = conn(local="10.0.0.3:3", inode=3, timer=500)  # a client's (a check's port probe)
    young = conn(local="10.0.0.3:2", inode=2, timer=300)  # the page's, out for 0.3 s
    old_data = conn(local="10.0.0.3:4", inode=4, state=1, retransmits=1, sent=1700, ack=9000)
    host.now = [old_syn, client, young, old_data]
    assert watch.held() is None
    clock[0] += 0.25  # 0.75 s into the ask
    host.now[2] = conn(local="10.0.0.3:2", inode=2, timer=550)
    held = watch.held()
    assert held is not None and "app's php-fpm8.2, 10.0.0.3:2 -> 10.0.0.4:3306" in held and "SYN" in held
    clock[0] += 0.5  # 1.25 s: the old SYN was sent again (1.65 s out), nginx's data went 0.7 s ago
    host.now = [
        conn(local="10.0.0.3:1", inode=1, retransmits=1, timer=650),
        conn(local="10.0.0.3:3", inode=3, retransmits=1, timer=0),
        conn(local="10.0.0.3:4", inode=4, state=1, retransmits=1, sent=700, ack=9000),
    ]
    held = watch.held() or ""
    assert "app's nginx, 10.0.0.3:4 -> 10.0.0.4:3306, has had 1 packet(s) sent again" in held, held


def test_the_watch_looks_often_at_first_then_less(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr("fixos.verifier.held.time.monotonic", lambda: clock[0])
    watch = NetworkWatch({"app": FakeHost([], {})})
    clock[0] = HELD_SECONDS
    assert watch.due()
    clock[0] += 0.09
    assert not watch.due()
    clock[0] += 0.01
    assert watch.due()  # every 0.1 s at first
    clock[0] = 4.0
    assert watch.due()
    clock[0] += 0.79
    assert not watch.due()  # then a fifth of the time asked so far
    clock[0] += 0.01
    assert watch.due()
    clock[0] = 14.0
    assert watch.due()
    clock[0] += 1.0
    assert watch.due()  # never more than 1 s apart
    assert not NetworkWatch({"web": object()}).due()  # a host not read from here: nothing watched


@pytest.fixture(scope="module")
def stack(client, images):
    hosts = [
        HostSpec(name="web", role="web"),
        HostSpec(name="app", role="app"),
        HostSpec(name="db", role="db", caps=["NET_ADMIN"]),
    ]
    with booted_stack(client, images, RUN_ID, hosts) as stack:
        yield stack


def page_probe(stack, patient=True):
    return Probe(None, None, stack.hosts["web"], patient, world=stack.hosts)  # type: ignore[arg-type]


DROP = "iptables -I INPUT -p tcp --dport 3306 -j DROP"


@pytest.mark.live
def test_a_page_whose_database_syn_is_dropped_fails_held(stack):
    assert get_page(page_probe(stack), 80, "/status").status == 200
    with stack.hosts["db"].shell() as db:
        assert db.run(DROP, timeout=10).ok
        try:
            began = time.monotonic()
            page = get_page(page_probe(stack), 80, "/status")
            took = time.monotonic() - began
        finally:
            assert db.run(DROP.replace("-I", "-D"), timeout=10).ok
    assert page.status == 0 and not page.timed_out, page
    assert "held by the network: app's php-fpm8.2" in page.error and ":3306" in page.error, page.error
    assert HELD_SECONDS <= took < HELD_SECONDS + 1, took  # not 5 s, nor 5 + 10
    assert get_page(page_probe(stack), 80, "/status").status == 200


@pytest.mark.live
def test_a_clients_dropped_syn_does_not_hold_a_page_that_hangs_otherwise(stack):
    with stack.hosts["db"].shell() as db, stack.hosts["app"].shell() as app:
        assert db.run(DROP, timeout=10).ok
        try:
            assert app.run("pkill -STOP php-fpm", timeout=10).ok  # the page hangs: no packet lost
            # a client's connect, opened while the page is asked (as a check's port probe)
            client = "sleep 0.5; exec timeout 20 bash -c 'exec 3<>/dev/tcp/db/3306'"
            assert app.run(f"(sh -c {shlex.quote(client)} >/dev/null 2>&1 &)", timeout=10).ok
            page = _ask(page_probe(stack, patient=False), 80, "/status", FIRST_WAIT)
        finally:
            app.run("pkill -CONT php-fpm; pkill -f 'bash -c exec 3<>'", timeout=10)
            assert db.run(DROP.replace("-I", "-D"), timeout=10).ok
    assert page.status == 0 and page.timed_out and "held" not in page.error, page
