"""The long-lived judge (``fixos.stack.judge``): one container per run and engine, outside
every host's PID namespace, whose sessions enter a host's namespaces with the judge's
own tools. It sees what an inspector sees, whatever root did to the host (the hostile
states of ``test_inspector``). The host can neither see nor kill the judge itself. It
serves every episode of a pool. Closing the pool removes it, and so does the sweep
after its owner was SIGKILLed. No judgement starts a container."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import helpers
import pytest
from test_inspector import HOSTILE, host, image, in_host, sees_the_host  # noqa: F401  (fixtures)

from fixos.episodes.episode import Episode
from fixos.episodes.inspection import JudgeSessions
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.solution import render
from fixos.stack import inspector as inspector_module
from fixos.stack.hosts import LABEL_RUN
from fixos.stack.inspector import host_path
from fixos.stack.judge import CAPABILITIES, LABEL_ROLE, ROLE, Judge
from fixos.stack.leftovers import sweep_dead_runs
from fixos.stack.pool import HostPool
from fixos.stack.sockets import unix_listens

APP_INI = "/etc/shop/app.ini"


def judges(client: docker.DockerClient, run_id: str) -> list[str]:
    filters = {"label": [f"{LABEL_RUN}={run_id}", f"{LABEL_ROLE}={ROLE}"]}
    return [c.id for c in client.containers.list(all=True, filters=filters, ignore_removed=True)]


@pytest.mark.live
@pytest.mark.parametrize("state", list(HOSTILE))
def test_the_judge_sees_the_host_whatever_root_did_to_it(client, host, image, test_run_id, state):  # noqa: F811
    app_ini = host.read_file(APP_INI)
    assert app_ini
    HOSTILE[state](client, host)
    with Judge(client, image, run_id=test_run_id) as judge:
        assert judge.usable, judge.why_not
        shell = judge.session(host)
        shell.default_timeout = 60  # a fork bomb beside it on a loaded machine
        try:
            sees_the_host(shell, app_ini)
            # the judge's own bash, in the judge's cgroup, whatever the host has
            [judge_id] = judges(client, test_run_id)
            mine = shell.run("cat /proc/$$/cgroup").output
            assert judge_id in mine and host.handle.container_id not in mine, mine
        finally:
            shell.close()


@pytest.mark.live
def test_the_judge_is_outside_the_host_and_holds_exactly_its_capabilities(
    client,
    host,  # noqa: F811
    image,  # noqa: F811
    test_run_id,
):
    with Judge(client, image, run_id=test_run_id) as judge:
        assert judge.usable, judge.why_not
        [judge_id] = judges(client, test_run_id)
        attrs = client.api.inspect_container(judge_id)
        config = attrs["HostConfig"]
        assert config["ReadonlyRootfs"] and config["CapDrop"] == ["ALL"] and config["PidMode"] == "host"
        assert sorted(c.removeprefix("CAP_") for c in config["CapAdd"]) == sorted(CAPABILITIES)
        assert config["NetworkMode"] == "none"
        # Its own process has one PID: the engine's. A host's processes have two.
        pid = attrs["State"]["Pid"]
        nspid = re.search(r"^NSpid:\s*(.*)$", Path(f"/proc/{pid}/status").read_text(), re.M).group(1).split()
        assert len(nspid) == 1, nspid
        host_init = client.api.inspect_container(host.handle.container_id)["State"]["Pid"]
        text = Path(f"/proc/{host_init}/status").read_text()
        assert len(re.search(r"^NSpid:\s*(.*)$", text, re.M).group(1).split()) == 2
        # root in the host kills everything it can see: the judge lives on, a new session judges
        in_host(client, host, "kill -9 -1; true")
        time.sleep(1)
        assert client.containers.get(judge_id).status == "running"
        shell = judge.session(host)
        try:
            assert shell.run(f"test -d {host_path('/etc/shop')} && echo yes").output.strip() == "yes"
        finally:
            shell.close()
    assert judges(client, test_run_id) == []  # closed: removed


@pytest.mark.live
def test_one_judge_serves_a_pools_episodes_and_no_judgement_starts_a_container(client, images, monkeypatch):
    def no_inspector(self):
        raise AssertionError("a judgement started an inspector")

    monkeypatch.setattr(inspector_module.Inspector, "start", no_inspector)
    scenario = load_catalog()["easy_1"]
    pool = HostPool(
        client, images, run_id=f"test-judge-{time.monotonic_ns()}", size=1, planned=[scenario.hosts] * 2
    )
    seen = []
    try:
        for seed in (1, 2):
            with Episode(scenario, seed, client=client, images=images, pool=pool) as ep:
                assert ep.shell.run(render(scenario.solution, ep.faults), timeout=60).ok
                assert ep.progress().reward == 1.0
                assert ep.verify().reward == 1.0
                seen.append(judges(client, pool.run_id))
        assert len(seen[0]) == 1 and seen[0] == seen[1], seen
    finally:
        pool.close()
    assert judges(client, pool.run_id) == []


@pytest.mark.live
@pytest.mark.parametrize("sessions", ["socket", "exec"])
def test_a_local_judges_sessions_are_connections_to_its_socket_not_engine_execs(
    client,
    host,  # noqa: F811
    image,  # noqa: F811
    test_run_id,
    monkeypatch,
    sessions,
):
    """Where the engine runs here, opening a session, running in it, and killing what
    outlived its time-out (a command beside the session) ask the engine nothing: each is
    a fork in the judge. Under FIXOS_JUDGE_SESSIONS=exec they are the engine's execs, and
    judge the same. The host sees neither the socket nor its server."""
    if sessions == "exec":
        monkeypatch.setenv("FIXOS_JUDGE_SESSIONS", "exec")
    execs: list[str] = []
    create = client.api.exec_create

    def counted(container, cmd, **kw):
        execs.append(container)
        return create(container, cmd, **kw)

    monkeypatch.setattr(client.api, "exec_create", counted)
    app_ini = host.read_file(APP_INI)
    with Judge(client, image, run_id=test_run_id) as judge:
        assert judge.usable, judge.why_not
        [judge_id] = judges(client, test_run_id)
        before = list(execs)
        shells = [judge.session(host) for _ in range(3)]
        try:
            for shell in shells:
                sees_the_host(shell, app_ini)
            slow = shells[0].run("sleep 30 && echo never", timeout=1)
            assert slow.timed_out and "never" not in slow.output
            assert shells[0].run("echo still").output.strip() == "still"
        finally:
            for shell in shells:
                shell.close()
        opened = [c for c in execs[len(before) :] if c == judge_id]
        if sessions == "socket":
            assert opened == [], f"{len(opened)} engine execs in the judge"
        else:
            assert len(opened) >= 4, opened  # three sessions and the kill beside one
    code, out = in_host(client, host, "[ -e /run/judge.sock ] && echo SOCKET-SEEN; pgrep -a socat; true")
    assert code == 0 and "SOCKET-SEEN" not in out and "socat" not in out, out


@pytest.mark.live
def test_a_judge_removed_from_outside_comes_back_at_the_next_session(client, host, image, test_run_id):  # noqa: F811
    """The judge dying is the harness's business, never the host's: the next session
    starts a new judge, and judges."""
    with Judge(client, image, run_id=test_run_id) as judge:
        assert judge.usable, judge.why_not
        [first] = judges(client, test_run_id)
        client.api.remove_container(first, force=True)
        assert not judge.alive()
        shell = judge.session(host)
        try:
            assert shell.run(f"cat {host_path(APP_INI)}").ok
        finally:
            shell.close()
        [second] = judges(client, test_run_id)
        assert second != first and judge.alive()


@pytest.mark.live
def test_a_host_that_stops_what_it_sees_can_still_be_removed(client, host, image, test_run_id):  # noqa: F811
    """A session's processes are the host's to see while it judges: root there stops them
    all, then kills them (as killall5 does at halt). The judge's side must still reap them,
    or the host's init can never finish exiting and the engine cannot remove the host
    (nsenter stopped itself when its child stopped, and its zombie kept the host alive)."""
    container_id = host.handle.container_id
    with Judge(client, image, run_id=test_run_id) as judge:
        assert judge.usable, judge.why_not
        shell = judge.session(host)
        assert shell.run("echo ready").ok
        in_host(client, host, "kill -STOP -1; sleep 0.5; kill -KILL -1; kill -CONT -1; true")
        shell.close()
        started = time.monotonic()
        client.api.remove_container(container_id, force=True)  # raised 500 "no exit event" before
        assert time.monotonic() - started < 10


_OWNER = """
import os, sys, time
from fixos.stack.engine import connect
from fixos.stack.judge import Judge
judge = Judge(connect(), sys.argv[1], run_id=sys.argv[2])
assert judge.usable, judge.why_not
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.live
def test_a_judge_whose_owner_was_killed_is_swept(client, image, test_run_id):  # noqa: F811
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, image, test_run_id], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        assert len(judges(client, test_run_id)) == 1
        sweep_dead_runs(client)
        assert len(judges(client, test_run_id)) == 1  # its owner lives: not swept
    finally:
        owner.kill()
        owner.wait()
    assert test_run_id in sweep_dead_runs(client)
    assert judges(client, test_run_id) == []


def test_a_judge_that_cannot_enter_says_why_and_is_not_usable() -> None:
    class Refusing:
        class containers:
            @staticmethod
            def run(*args, **kwargs):
                raise docker.errors.APIError("userns remapping forbids pid=host")

    judge = Judge(Refusing(), "inspector", run_id="x")  # type: ignore[arg-type]
    assert not judge.usable
    assert judge.why_not is not None and "pid=host" in judge.why_not
    assert not judge.usable  # tried once, not again


def test_hosts_never_get_ptrace(tmp_path) -> None:
    """The judge's sessions hold capabilities a host's root lacks; a host with SYS_PTRACE
    could read into them. The scenario schema allows NET_ADMIN only."""
    from pydantic import ValidationError

    from fixos.scenarios.schema import HostSpec

    with pytest.raises(ValidationError):
        HostSpec(name="web", caps=["SYS_PTRACE"])  # type: ignore[list-item]


@pytest.mark.live
def test_a_session_resolves_names_as_the_host_does(client, host, image, test_run_id):  # noqa: F811
    """Checks that reach a peer by name (``db_reachable`` from app) read the host's own
    /etc/hosts and resolv.conf, edits included (the DNS faults write there), not the
    judge's (which has no network, hence no resolver of the engine)."""
    code, out = in_host(client, host, "printf '10.9.8.7\\tstale-db\\n' >> /etc/hosts")
    assert code == 0, out
    with Judge(client, image, run_id=test_run_id) as judge:
        shell = judge.session(host)
        try:
            assert shell.run("getent hosts stale-db").output.split() == ["10.9.8.7", "stale-db"]
            assert "127.0.0.11" in shell.run("cat /etc/resolv.conf").output  # the engine's resolver
        finally:
            shell.close()


@pytest.mark.live
def test_kept_sessions_read_the_name_files_again_at_each_judgement(client, host, image, test_run_id):  # noqa: F811
    """An episode's sessions are kept from the judgement after the faults (a stale
    /etc/hosts line) to the one after the repair: each judgement resolves with the host's
    files as they are then, in every session of the host's pool, not as they were when
    the session opened."""
    stale = "cp /etc/hosts /root/hosts.ok && printf '10.9.8.7\\tkept-db\\n' >> /etc/hosts"
    code, out = in_host(client, host, stale)
    assert code == 0, out
    edits = ["cat /root/hosts.ok > /etc/hosts", "printf '10.1.2.3\\tkept-db\\n' >> /etc/hosts"]
    seen: list[set[str]] = []
    with Judge(client, image, run_id=test_run_id) as judge:
        sessions = JudgeSessions(judge, {host.name: host})
        try:
            for edit in [*edits, None]:
                with sessions.looking(patient=False) as looking, ThreadPoolExecutor(3) as pool:
                    run = looking.shells[host.name].run
                    # side by side, so the pool opens (then keeps) all its sessions
                    said = pool.map(run, ["sleep 0.5; getent hosts kept-db"] * 3)
                    seen.append({(out.output.split() or ["none"])[0] for out in said})
                if edit:
                    assert in_host(client, host, edit)[0] == 0
        finally:
            sessions.close()
    assert seen == [{"10.9.8.7"}, {"none"}, {"10.1.2.3"}], seen


def _judge_processes(client: docker.DockerClient, host_id: str, judge_id: str) -> list[str]:
    """The judge's processes inside ``host_id``'s PID namespace, as the host sees them."""
    _, out = client.containers.get(host_id).exec_run(
        ["/bin/sh", "-c", f"grep -l {judge_id} /proc/[0-9]*/cgroup 2>/dev/null; true"]
    )
    return out.decode().split()


@pytest.mark.live
def test_an_episode_keeps_its_sessions_and_renews_the_ones_its_host_killed(client, images, monkeypatch):
    """The running score after each step reuses the episode's sessions (a host's pool grows
    to at most ``SESSIONS_PER_HOST`` as the checks' commands overlap, and no judgement opens
    one beyond it); an agent that kills every bash of its host between two steps costs the
    next judgement new sessions, not its verdict; closing the episode ends its sessions."""
    most = JudgeSessions.SESSIONS_PER_HOST
    opened = []
    session = Judge.session
    monkeypatch.setattr(Judge, "session", lambda self, live: opened.append(live.name) or session(self, live))
    scenario = load_catalog()["easy_1"]
    with Episode(scenario, 1, client=client, images=images, run_id=f"test-keep-{time.monotonic_ns()}") as ep:
        host_id = ep.host.handle.container_id
        assert ep.shell.run(render(scenario.solution, ep.faults), timeout=60).ok
        assert 1 <= len(opened) <= most, opened  # the reset's judgements: one pool
        assert [ep.progress().reward for _ in range(5)] == [1.0] * 5
        assert len(opened) <= most, opened  # kept: five judgements opened none beyond the pool
        before_kill = len(opened)
        [judge_id] = judges(client, ep.run_id)
        assert _judge_processes(client, host_id, judge_id)  # the kept session, seen from the host
        killed = client.containers.get(host_id).exec_run(["/bin/sh", "-c", "pkill -KILL -x bash; true"])
        assert killed.exit_code == 0
        assert ep.progress().reward == 1.0
        assert before_kill < len(opened) <= before_kill + most, opened  # renewed, not failed
        assert ep.verify().reward == 1.0
        ep._sessions.close()  # what close() does first: the host stays up to be looked at
        deadline = time.monotonic() + 10
        while _judge_processes(client, host_id, judge_id) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _judge_processes(client, host_id, judge_id) == []


@pytest.mark.live
@pytest.mark.parametrize("read", ["from the judge", "from this machine"])
def test_config_tests_are_kept_while_what_they_read_is_unchanged(client, host, image, test_run_id, read):  # noqa: F811
    """``services_official`` runs the daemons' config tests once and keeps their answers
    for the host's next judgement while nothing they read changed; a broken nginx.conf,
    then the same file put back (its content as before, its change time not), each run
    them again and are judged by their answers. What they read is known by a ``find`` in
    the judge, or, where the host's facts are read from this machine, by those."""
    from fixos.stack.inspector import HOST_ROOT
    from fixos.verifier.backend import testinfra_host
    from fixos.verifier.base import Probe
    from fixos.verifier.config_tests import ARGV
    from fixos.verifier.integrity import ServicesOfficial

    ran: list[str] = []

    class Counting:
        def __init__(self, host):
            self._host, self.name = host, host.name

        def run_program(self, argv, *args, **kwargs):
            # the three tests go in one script (``side_by_side``): count the programs it runs
            ran.extend(a[0] for a in ARGV.values() if shlex.join(a) in argv[-1])
            return self._host.run_program(argv, *args, **kwargs)

    if read == "from this machine":
        assert host.facts() is not None
        Counting.facts = lambda self: self._host.facts()  # type: ignore[attr-defined]

    check, memo = ServicesOfficial(ServicesOfficial.Params()), {}
    with Judge(client, image, run_id=test_run_id) as judge:
        shell = judge.session(host)
        try:
            probe = Probe(testinfra_host(shell, host.name), shell, Counting(host), root=HOST_ROOT, memo=memo)
            baseline = check.snapshot(probe)
            assert len(ran) == 3 and memo
            assert check.evaluate(probe, baseline).passed and len(ran) == 3  # kept
            code, out = in_host(
                client, host, "cp /etc/nginx/nginx.conf /root/n && echo 'bogus;' >> /etc/nginx/nginx.conf"
            )
            assert code == 0, out
            time.sleep(0.1)  # facts changed within 50 ms equal no others (SETTLING_NS): nothing kept
            broken = check.evaluate(probe, baseline)
            assert len(ran) == 6 and not broken.passed
            assert broken.detail.startswith("nginx's configuration fails its test: "), broken.detail
            assert not check.evaluate(probe, baseline).passed and len(ran) == 6  # kept, failing
            code, out = in_host(client, host, "cat /root/n > /etc/nginx/nginx.conf")
            assert code == 0, out
            time.sleep(0.1)
            assert check.evaluate(probe, baseline).passed and len(ran) == 9
        finally:
            shell.close()


class CountingTests:
    """A live host whose config tests run through it are named in ``ran``, in the order run."""

    def __init__(self, live, ran: list[str]) -> None:
        self._host, self.name, self._ran = live, live.name, ran

    def run_program(self, argv, *args, **kwargs):
        from fixos.verifier.config_tests import ARGV

        self._ran.extend(name for name, a in ARGV.items() if shlex.join(a) in argv[-1])
        return self._host.run_program(argv, *args, **kwargs)

    def facts(self):
        return self._host.facts()

    def view(self):
        return self._host.view()


@contextlib.contextmanager
def two_hosts_on_a_judge(client, images, judge_image, run_id, ran):
    """Two booted hosts of the image, a judge, and a probe of each whose config tests are
    counted in ``ran`` and lend through the judge; the shells are the caller's to close."""
    from fixos.stack.inspector import HOST_ROOT
    from fixos.verifier.backend import testinfra_host
    from fixos.verifier.base import Probe

    with (
        helpers.booted(client, images, run_id) as first,
        helpers.booted(client, images, f"{run_id}-b") as second,
        Judge(client, judge_image, run_id=run_id) as judge,
    ):
        shells = [judge.session(first), judge.session(second)]
        probes = [
            Probe(
                testinfra_host(s, h.name),
                s,
                CountingTests(h, ran),
                root=HOST_ROOT,
                memo={},
                across=judge.lent,
            )
            for s, h in zip(shells, (first, second), strict=True)
        ]
        yield first, second, judge, probes, shells


@pytest.mark.live
def test_a_config_test_is_lent_between_hosts_that_hold_the_same_bytes(
    client,
    images,
    image,  # noqa: F811
    test_run_id,
    tmp_path,
    monkeypatch,
):
    """MariaDB's and PHP-FPM's config tests read nothing a healthy host changes: one host's
    answers serve the next host of the image on the judge (nginx's test always runs: it
    resolves names and loads the episode's certificates), and a later judge's, as a later
    run's, from disk. A host whose option files differ (a bogus option in root's ~/.my.cnf)
    runs its own test and fails it."""
    monkeypatch.setenv("FIXOS_CACHE_DIR", str(tmp_path))  # nothing kept by earlier runs
    from fixos.stack.inspector import HOST_ROOT
    from fixos.verifier.backend import testinfra_host
    from fixos.verifier.base import Probe
    from fixos.verifier.integrity import ServicesOfficial

    ran: list[str] = []

    check = ServicesOfficial(ServicesOfficial.Params())
    with two_hosts_on_a_judge(client, images, image, test_run_id, ran) as (
        first,
        second,
        judge,
        probes,
        shells,
    ):
        try:
            time.sleep(0.1)  # past SETTLING_NS since the boot's last writes
            baseline = check.snapshot(probes[0])
            assert sorted(ran) == ["mariadbd", "nginx", "php-fpm8.2"] and len(judge.lent) == 2
            assert check.evaluate(probes[1], baseline).passed and ran[3:] == ["nginx"]  # lent
            code, out = in_host(client, second, "printf '[mysqld]\\nbogus_option = 1\\n' > /root/.my.cnf")
            assert code == 0, out
            time.sleep(0.1)
            verdict = check.evaluate(probes[1], baseline)
            assert sorted(ran[4:]) == ["mariadbd", "nginx"], ran  # PHP's lent, MariaDB's its own
            assert not verdict.passed and "mariadbd's configuration fails its test" in verdict.detail
            assert check.evaluate(probes[0], baseline).passed and ran[6:] == []  # kept in the episode
            with Judge(client, image, run_id=f"{test_run_id}-later") as later:  # a later run's judge
                assert len(later.lent) == 0
                shells.append(later.session(first))
                probe = Probe(
                    testinfra_host(shells[-1], first.name),
                    shells[-1],
                    CountingTests(first, ran),
                    root=HOST_ROOT,
                    memo={},
                    across=later.lent,
                )
                assert check.evaluate(probe, baseline).passed and ran[6:] == ["nginx"], ran  # from disk
        finally:
            for shell in shells:
                shell.close()


@pytest.mark.live
def test_a_failed_config_test_is_never_lent(client, images, image, test_run_id, tmp_path, monkeypatch):  # noqa: F811
    """A test the host's own processes make fail without a byte changed (a leftover loop
    killing it) fails that host only: its answer is neither lent to the next host of the
    same bytes nor kept on disk for later runs; a pass is."""
    from fixos.records.config_answers import ConfigAnswers
    from fixos.verifier.config_tests import tests_in_host

    monkeypatch.setenv("FIXOS_CACHE_DIR", str(tmp_path))
    ran: list[str] = []

    names = ["mariadbd", "php-fpm8.2"]
    with two_hosts_on_a_judge(client, images, image, test_run_id, ran) as (first, _, judge, probes, shells):
        try:
            loop = "while :; do pkill -9 -f '^/usr/sbin/mariadb[d] --help'; done"  # not the exec's shell
            killer = f"nohup setsid sh -c {shlex.quote(loop)} >/dev/null 2>&1 &"
            code, out = in_host(client, first, killer)
            assert code == 0, out
            time.sleep(0.2)  # past SETTLING_NS since the boot's last writes
            found = tests_in_host(probes[0], names)
            assert found["mariadbd"] != "" and found["php-fpm8.2"] == "", found
            assert [k.split()[0] for k in judge.lent] == ["php-fpm8.2"]  # the pass only
            assert [k.split()[0] for k in ConfigAnswers()] == [] and len(list(tmp_path.rglob("*.json"))) == 1
            found = tests_in_host(probes[1], names)
            assert found == {"mariadbd": "", "php-fpm8.2": ""}
            assert sorted(ran) == ["mariadbd", "mariadbd", "php-fpm8.2"], ran  # MariaDB's its own, PHP's lent
            assert sorted(k.split()[0] for k in judge.lent) == sorted(names)
        finally:
            for shell in shells:
                shell.close()


@pytest.mark.live
def test_an_episodes_checks_look_in_threads_kept_between_its_judgements(
    client, images, test_run_id, monkeypatch
):
    """The checks of an episode's judgements look in threads its judge sessions keep, and
    end with them: started anew, each judgement started 6-17 threads, and where sessions
    ran side by side each start waited its turn for the interpreter's lock. On split_1 the
    three hosts' sessions are readied in those threads too, and the verdicts stay right."""
    from fixos.episodes import inspection
    from fixos.verifier import verify

    made: list[str] = []

    def no_pool(*args, **kwargs):
        made.append(repr((args, kwargs)))
        raise AssertionError("a judgement made a pool of its own")

    with Episode(load_catalog()["split_1"], 1, client=client, images=images, run_id=test_run_id) as ep:
        assert ep.progress().reward == 0.0
        kept = ep._sessions._workers
        assert kept is not None
        with monkeypatch.context() as patched:
            patched.setattr(verify, "ThreadPoolExecutor", no_pool)
            patched.setattr(inspection, "ThreadPoolExecutor", no_pool)
            for _ in range(3):
                assert ep.progress().reward == 0.0
        assert made == [] and ep._sessions._workers is kept
        ep.shell.run(render(ep.scenario.solution, ep.faults), timeout=120)
        assert ep.verify().reward == 1.0
    assert kept._shutdown


@pytest.mark.live
@pytest.mark.parametrize("sid, breaks_nginx", [("easy_1", False), ("medium_1", True)])
def test_nginx_tested_before_the_faults_spares_the_resets_exec(
    client, images, test_run_id, sid, breaks_nginx, monkeypatch
):
    """nginx's config test, answered through the harness's session before any fault went in
    (``tests_before_faults``), is what the reset's judgement finds while what the test reads
    is unchanged: easy_1 stops nginx, and no engine exec runs the test. A fault that breaks
    nginx's configuration (medium_1) makes that judgement run it in the host through the
    engine, where it fails (nginx then need not pass it to count as repaired). Either way the
    oracle's repair scores 1.0."""
    from fixos.stack.hosts import LiveHost
    from fixos.verifier.config_tests import ARGV

    ran: list[str] = []
    run_program = LiveHost.run_program

    def counting(self, argv, *args, **kwargs):
        ran.extend(name for name, a in ARGV.items() if shlex.join(a) in argv[-1])
        return run_program(self, argv, *args, **kwargs)

    monkeypatch.setattr(LiveHost, "run_program", counting)
    scenario = load_catalog()[sid]
    gate = next(c.name for c in scenario.checks if c.type == "services_official")
    with Episode(scenario, 1, client=client, images=images, run_id=test_run_id) as ep:
        assert ("nginx" in ran) == breaks_nginx, ran
        assert ("nginx" in ep._baseline[gate]["must_test"]) != breaks_nginx
        ep.shell.run(render(scenario.solution, ep.faults), timeout=120)
        assert ep.verify().reward == 1.0


def test_a_socket_counts_as_ready_once_it_listens_not_once_it_is_bound(tmp_path) -> None:
    """socat's bind() makes the socket's file a moment before its listen(): a session
    opened between them was refused, and the episode fell back to inspectors."""
    path = str(tmp_path / "judge.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        assert Path(path).exists() and not unix_listens(os.getpid(), path)
        server.listen()
        assert unix_listens(os.getpid(), path)


@pytest.mark.live
def test_judges_started_side_by_side_each_serve_their_socket_at_once(client, host, image, test_run_id):  # noqa: F811
    """Episodes without a pool start a judge each; every one is usable through its socket
    and answers its first session."""

    def start(_: int) -> str:
        with Judge(client, image, run_id=test_run_id) as judge:
            assert judge.usable, judge.why_not
            with judge.session(host) as shell:
                return shell.run("echo up").output.strip()

    with ThreadPoolExecutor(max_workers=6) as pool:
        assert list(pool.map(start, range(6))) == ["up"] * 6
