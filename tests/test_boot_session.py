"""The harness's first session on a host of a local engine comes from the host's boot
(``fixos.shells.boot``: a fork of ``fixos-init``'s listener), not from an engine exec; it is
init's child, left out of the steady state while open, and ended before any agent comes,
once it started the agent's first session on the login host (a fork too). Where it cannot
be had, the session is an exec and no listener stays in the host."""

from __future__ import annotations

import pytest
from helpers import labelled

from fixos.episodes.episode import Episode
from fixos.episodes.phases import end_sessions
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.schema import HostSpec
from fixos.shells.boot import BootShell
from fixos.shells.exec import ExecShell
from fixos.stack import boot_session
from fixos.stack.hosts import Stack

pytestmark = pytest.mark.live


def _stack(client, images, run_id) -> Stack:
    stack = Stack(client, run_id=run_id, episode_id=run_id, hosts=[HostSpec(name="web")], images=images)
    stack.up()
    return stack


def _listener_left(shell) -> str:
    return shell.run("pgrep -a -f fixos-harness; ls -d /run/fixos-harness 2>/dev/null; true").output.strip()


def test_the_first_session_is_a_fork_of_the_boot_and_ends_with_nothing_left(client, images, test_run_id):
    stack = _stack(client, images, test_run_id)
    try:
        host = stack.hosts["web"]
        shell = stack.take_shells()["web"]
        assert isinstance(shell, BootShell)
        # the boot's wait, the keys, the certificates went through it: no exec so far
        assert not client.api.inspect_container(host.handle.container_id)["ExecIDs"]
        pid, parent = shell.run("echo $$ $PPID").output.split()
        assert (int(pid), parent) == (shell.pid, "1")
        assert host.boot_sessions == {shell.pid}
        assert _listener_left(shell) == ""  # one connection taken, its socket removed
        end_sessions({"web": shell})
        assert host.boot_sessions == set()
        with host.shell() as look:
            assert look.run(f"[ -e /proc/{pid} ] || echo gone").output.strip() == "gone"
    finally:
        stack.down()


def test_a_session_that_ended_opens_again_by_exec(client, images, test_run_id):
    stack = _stack(client, images, test_run_id)
    try:
        host = stack.hosts["web"]
        shell = stack.take_shells()["web"]
        shell.run("cd /tmp && export KEPT=yes")
        assert shell.run("exit 3").exit_code == 3  # its EXIT trap's word: init, its parent, tells no one
        again = shell.run('echo "$KEPT $(pwd) $(ps -o ppid= -p $PPID)"')  # setsid's parent
        assert again.ok and again.output.split() == ["yes", "/tmp", "0"]  # an exec's, its state restored
        assert host.boot_sessions == set()
        shell.close()
    finally:
        stack.down()


def test_without_a_listener_the_first_session_is_an_exec(client, images, test_run_id, monkeypatch):
    monkeypatch.setenv("FIXOS_BOOT_SESSION", "0")
    stack = _stack(client, images, test_run_id)
    try:
        shell = stack.take_shells()["web"]
        assert type(shell) is ExecShell
        assert _listener_left(shell) == ""
        assert stack.hosts["web"].boot_sessions == set()
        shell.close()
    finally:
        stack.down()


def test_a_listener_that_does_not_answer_is_told_to_go(client, images, test_run_id, monkeypatch):
    def refused(*args, **kwargs):
        raise boot_session.ShellError("refused for the test")

    monkeypatch.setattr(boot_session, "BootShell", refused)
    stack = _stack(client, images, test_run_id)
    try:
        shell = stack.take_shells()["web"]
        assert type(shell) is ExecShell
        assert _listener_left(shell) == ""
        shell.close()
    finally:
        stack.down()


def test_the_agents_first_session_is_handed_over_by_the_harness_and_judged_once_closed(
    client, images, test_run_id
):
    easy_1 = load_catalog()["easy_1"]
    with Episode(easy_1, 1, client=client, images=images, run_id=test_run_id) as ep:
        shell = ep.shell()
        assert isinstance(shell, BootShell)
        assert ep.host.boot_sessions == {shell.pid}
        parent = ep.shell.run("echo $PPID; ps -o ppid= -p $$").output.split()
        assert parent[1] == "1", parent  # init's, once the harness's session ended
        assert _listener_left(shell) == ""
        assert ep.shell.run("ls /run | grep -c fixos-hand").output.strip() == "0"  # its FIFOs removed
        # nothing went through the engine's exec yet: neither the harness nor the agent
        assert not client.api.inspect_container(ep.host.handle.container_id)["ExecIDs"]
        ep.shell.run("service nginx start")
        ep.shell.run("nohup bash -c 'while :; do sleep 1; done' >/dev/null 2>&1 &")
        verdict = ep.verify()
        assert ep.host.boot_sessions == set()
        failed = {c.name: c.detail for c in verdict.checks if not c.passed}
        loop = "(bash -c while :; do sleep 1; done)"
        assert verdict.reward == 0.0 and loop in " ".join(failed.values()), failed
        ep.shell.run("pkill -f 'while :; do sleep 1; done'")  # an exec now: the handed one was closed
        assert ep.verify().reward == 1.0
    assert labelled(client, test_run_id) == []
