"""The running score keeps what did not change (``fixos.stack.facts``, ``Check.facts``).

A host's facts, read from this machine, are still on a quiet host and move with every
change a check could see: a file rewritten with its times set back, a mode changed on
the log tmpfs, a process started, a listener opened. An episode's progress asks again
only the checks whose facts moved (and those that declare none), and still sees a
drop-in added, a mode loosened, and a setting changed through MariaDB's own protocol."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import time

import pytest
from helpers import until_listening
from hypothesis import given, settings
from hypothesis import strategies as st

from fixos.episodes.episode import Episode
from fixos.episodes.inspection import JudgeSessions
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.solution import render
from fixos.stack import sockdiag
from fixos.stack.facts import _related, _relation
from fixos.stack.hosts import LiveHost
from fixos.verifier import CHECKS, Check, backend

TREES = ["/etc/nginx", "/var/www", "/var/log", "/run"]


def _reading(host: LiveHost) -> dict[str, bytes]:
    facts = host.facts()
    assert facts is not None, "this machine's engine: the host's facts must be readable here"
    return {
        "processes": facts.processes(),
        "listening": facts.listening(),
        "modes": facts.files(TREES, contents=False),
        "config": facts.files(["/etc/nginx"]),
    }


def _quiet(host: LiveHost) -> dict[str, bytes]:
    """A reading once the host's own changes settled (two equal readings in a row)."""
    last = _reading(host)
    for _ in range(20):
        time.sleep(0.1)
        now = _reading(host)
        if now == last:
            return now
        last = now
    raise AssertionError(f"the facts of a quiet host never settled: {last}")


def _moved(before: dict[str, bytes], after: dict[str, bytes]) -> set[str]:
    return {kind for kind in before if before[kind] != after[kind]}


@pytest.mark.live
def test_facts_are_still_on_a_quiet_host_and_move_with_each_change(live_host: LiveHost):
    shell = live_host.shell(default_timeout=20)
    try:
        before = _quiet(live_host)
        # content changed, size and times set back: only the change time tells
        conf = "/etc/nginx/nginx.conf"
        changed = shell.run(
            f"cp -p {conf} /tmp/keep && sed -i 's/worker_connections 768/worker_connections 769/' {conf} "
            f"&& touch -r /tmp/keep {conf} && cmp -s /tmp/keep {conf}; test $? = 1"
        )
        assert changed.ok, changed.output
        after = _quiet(live_host)
        assert "config" in _moved(before, after)

        before = after
        assert shell.run("chmod 777 /var/log/nginx").ok  # on the log tmpfs, not the overlay
        after = _quiet(live_host)
        assert _moved(before, after) >= {"modes"}
        assert "config" not in _moved(before, after)

        before = after
        assert shell.run("setsid sleep 300 </dev/null >/dev/null 2>&1 &").ok
        after = _quiet(live_host)
        assert _moved(before, after) == {"processes"}

        before = after
        assert shell.run("setsid nc -l -p 8089 </dev/null >/dev/null 2>&1 &").ok
        after = _quiet(live_host)
        assert {"processes", "listening"} <= _moved(before, after)
    finally:
        shell.close()


MODE_CHANGES = (
    "chmod 777 /etc/nginx",  # one of the image's directories: overlay copies it up
    "chown www-data /etc/mysql/mariadb.cnf",
    "chmod -R 777 /var/lib/mysql/shop",
    "install -m 666 /dev/null /etc/new.conf",
    "install -m 777 /dev/null /var/log/open.log",  # on the log tmpfs, a mount of the host's
    "mkfifo -m 666 /etc/pipe",
    "rm /etc/nginx/mime.types",  # overlay's whiteout: deleted, listed by neither
    "rm -rf /etc/nginx/snippets && mkdir -m 1777 /etc/nginx/snippets",  # an opaque directory
    "ln -s / /etc/rootlink",  # a link's mode means nothing
    "mv /etc/php /etc/php-moved",  # a renamed tree of the image's
    "chmod 600 /var/log/nginx",
)


@pytest.mark.live
def test_modes_read_from_this_machine_are_the_judges_own_verdict(live_host: LiveHost):
    """``modes_unchanged`` reads what a host changed from this machine (its overlay upper
    directory and its own mounts) instead of a ``find`` in the host: on a host loosened
    in every way a path's owner and mode can change, both readings find the same."""
    from fixos.verifier.base import Probe
    from fixos.verifier.modes import ModesUnchanged

    shell = live_host.shell(default_timeout=30)
    try:
        inside = Probe(backend.testinfra_host(shell), shell, live_host)
        check = ModesUnchanged(ModesUnchanged.Params())
        healthy = check.snapshot(inside)["paths"]
        assert shell.run(" && ".join(MODE_CHANGES), timeout=60).ok
        by_find = check._compare(inside, healthy)
        outside = Probe(backend.testinfra_host(shell), shell, live_host, known_facts=live_host.facts())
        assert check._read_outside(outside) is not None, "this machine's engine: the facts must say"
        by_facts = check._compare(outside, healthy)
    finally:
        shell.close()
    assert by_find.changed == by_facts.changed
    assert sorted(by_find.world_writable) == sorted(by_facts.world_writable)
    assert by_find.changed["/etc/nginx"] == "0:0:777:d" and "/var/log/nginx" in by_find.changed
    assert by_find.changed["/etc/mysql/mariadb.cnf"].startswith("33:0:")
    assert by_find.changed["/etc/nginx/snippets"] == "0:0:1777:d"
    assert {"/etc/new.conf", "/var/log/open.log", "/etc/pipe"} <= set(by_find.world_writable)
    assert "/etc/rootlink" not in by_find.world_writable


CONFIG_CHANGES = (
    "printf 'user www-data;\\n' > /etc/nginx/conf.d/open.conf",  # a drop-in added
    "sed -i 's/^\\(worker_processes\\) .*/\\1   4;   # more/' /etc/nginx/nginx.conf",  # changed
    "printf '\\n# note\\n   \\n' >> /etc/mysql/my.cnf",  # reformatted only: the same tokens
    "printf 'a\\tb  # c\\r\\nno newline at the end' > /etc/default/odd",
    "rm /etc/nginx/mime.types",
    "ln -s /etc/shadow /etc/nginx/sites-enabled/link",
    "rm -rf /etc/php/8.2/cli && ln -s / /etc/php/8.2/cli",  # a directory turned into a link
    "head -c 1100000 /dev/zero > /etc/mysql/big.cnf",
    "printf 'key' > /etc/nginx/new.key",  # key material: judged apart
    "mv /etc/cron.d /etc/cron.d.old && mkdir /etc/cron.d && printf '* * * * * root true\\n' > /etc/cron.d/x",
)


@pytest.mark.live
def test_configuration_read_from_this_machine_is_the_judges_own_reading(live_host: LiveHost):
    """``config_unchanged`` reads the configuration trees from this machine, inside the
    host's root, where the engine is local: on a host changed in every way a file of
    them can change, its reading is ``find`` and ``awk``'s in the host, file for file."""
    import types

    from fixos.verifier.base import Probe
    from fixos.verifier.configuration import TREES, config_files

    shell = live_host.shell(default_timeout=30)
    try:
        assert shell.run(" && ".join(CONFIG_CHANGES), timeout=60).ok
        by_find = config_files(
            Probe(backend.testinfra_host(shell), shell, types.SimpleNamespace()), list(TREES)
        )
        here = Probe(backend.testinfra_host(shell), shell, live_host, memo={})
        assert live_host.local_files() is not None
        by_hand, kept = config_files(here, list(TREES)), config_files(here, list(TREES))
    finally:
        shell.close()
    assert by_hand == by_find
    assert kept == by_find  # read again with the tokens kept
    assert by_find["/etc/nginx/sites-enabled/link"] == "l /etc/shadow"
    assert by_find["/etc/php/8.2/cli"] == "l /" and "/etc/php/8.2/cli/php.ini" not in by_find
    assert by_find["/etc/mysql/big.cnf"] == "big 1100000"
    assert len(by_find) > 50 and by_find["/etc/default/odd"].startswith("f ")
    assert "/etc/cron.d/x" in by_find and "/etc/cron.d.old/x" not in by_find
    assert "/etc/nginx/new.key" not in by_find and "/etc/nginx/mime.types" not in by_find


def test_a_host_filled_with_files_past_the_bound_has_facts_equal_to_nothing(tmp_path, monkeypatch):
    """Past ``MAX_ENTRIES`` this process stops walking the host's upper directory: its file
    facts then equal no others (every check is asked again) and give no modes (the judge's
    bounded listing is asked instead)."""
    from fixos.stack import facts as facts_module

    upper = tmp_path / "upper"
    (upper / "tmp").mkdir(parents=True)
    for i in range(12):
        (upper / "tmp" / f"f{i}").touch()
    time.sleep(0.1)  # settled: below the bound, two readings would be equal
    monkeypatch.setattr(facts_module, "MAX_ENTRIES", 10)
    root = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        reading = facts_module.HostFacts(os.getpid(), str(upper), root)
        assert reading.files(["/tmp"]) != reading.files(["/tmp"])
        assert reading.modes(["/tmp"]) is None
    finally:
        os.close(root)


def test_the_early_config_tests_wait_past_the_facts_settling_time():
    """A reading taken while the boot's last writes settle keys nothing: the harness's early
    config tests read again after ``SETTLE_WAIT``, which must outlast ``SETTLING_NS``; and a
    reading that never settles keeps nothing (the reset then runs the test by the engine)."""
    from fixos.stack.facts import SETTLING_NS
    from fixos.verifier import config_tests

    assert config_tests.SETTLE_WAIT > SETTLING_NS / 1e9

    class Settling:
        def files(self, *args, **kwargs):
            return os.urandom(16)

    readings = []
    assert (
        config_tests.answered_before_faults(lambda: readings.append(1) or Settling(), None, ["nginx"]) == {}
    )
    assert len(readings) == config_tests.SETTLE_TRIES


def test_processes_are_read_only_from_a_procfs_of_the_hosts_namespace(tmp_path):
    """A host's processes are listed from its own ``/proc``, and only where that is the
    kernel's procfs of the host's PID namespace: a directory made to look like one (its
    init's namespace link naming the right namespace, a process entry beside it) gives no
    process at all (the live tests hold a real host's listing equal to the judge's)."""
    from fixos.stack import facts as facts_module

    fake = tmp_path / "fake"
    (fake / "proc" / "1" / "ns").mkdir(parents=True)
    os.symlink(os.readlink("/proc/self/ns/pid"), fake / "proc" / "1" / "ns" / "pid")
    stat_line = "1 (nginx) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n"
    (fake / "proc" / "1" / "stat").write_text(stat_line)
    (fake / "proc" / "1" / "cmdline").write_text("nginx\0")
    root = os.open(fake, os.O_PATH | os.O_DIRECTORY)
    try:
        assert os.readlink(fake / "proc" / "1" / "ns" / "pid") == os.readlink(f"/proc/{os.getpid()}/ns/pid")
        assert facts_module.HostFacts(os.getpid(), str(tmp_path), root).process_table() == []
    finally:
        os.close(root)


@pytest.mark.live
def test_a_link_on_the_log_tmpfs_is_read_as_a_link(live_host: LiveHost):
    """The mounts are walked inside the host's root: a link planted there to ``/`` is one
    entry, never a walk of this machine's root."""
    shell = live_host.shell(default_timeout=20)
    try:
        assert shell.run("ln -s / /var/log/escape && mkfifo /var/log/pipe").ok
        facts = live_host.facts()
        assert facts is not None
        facts.files(["/var/log"])
        walked = [e[0] for e in facts._read["files"] if e[0].startswith("/var/log")]  # type: ignore[union-attr]
        assert "/var/log/escape" in walked and "/var/log/pipe" in walked
        assert not any(p.startswith("/var/log/escape/") for p in walked), walked
    finally:
        shell.close()


@pytest.mark.live
def test_progress_asks_again_only_what_moved_and_still_sees_each_loosening(client, images, monkeypatch):
    asked: collections.Counter[str] = collections.Counter()
    kinds = ("config_unchanged", "modes_unchanged", "server_settings_unchanged", "port_listening")
    for kind in (*kinds, "programs_unchanged", "logs_kept"):
        cls: type[Check] = CHECKS.get(kind)
        evaluate = cls.evaluate
        monkeypatch.setattr(
            cls,
            "evaluate",
            lambda self, probe, baseline, _e=evaluate, _k=kind: (
                asked.update([_k]) or _e(self, probe, baseline)
            ),
        )
    scenario = load_catalog()["easy_1"]
    with Episode(scenario, 1, client=client, images=images, run_id=f"test-facts-{time.monotonic_ns()}") as ep:
        assert ep.shell.run(render(scenario.solution, ep.faults), timeout=60).ok
        assert ep.progress().reward == 1.0
        asked.clear()
        assert [ep.progress().reward for _ in range(3)] == [1.0] * 3
        # declared no facts: asked every time; the others' facts did not move
        assert asked["server_settings_unchanged"] == 3
        assert asked["config_unchanged"] == asked["modes_unchanged"] == asked["port_listening"] == 0, asked
        assert asked["programs_unchanged"] == asked["logs_kept"] == 0, asked

        def failing() -> list[str]:
            return [c.type for c in ep.progress().checks if not c.passed]

        assert ep.shell.run("echo 'client_max_body_size 1g;' > /etc/nginx/conf.d/big.conf").ok
        assert "config_unchanged" in failing()
        assert ep.shell.run("rm /etc/nginx/conf.d/big.conf").ok
        assert failing() == []
        assert ep.shell.run("chmod 777 /var/www/html").ok
        assert "modes_unchanged" in failing()
        assert ep.shell.run("chmod 755 /var/www/html").ok
        assert failing() == []
        assert ep.shell.run("mv /var/log/nginx/access.log /var/log/.kept").ok
        assert "logs_kept" in failing()
        assert ep.shell.run("mv /var/log/.kept /var/log/nginx/access.log").ok
        assert failing() == []
        asked.clear()
        healthy = ep.shell.run("mariadb -N -B -e 'SELECT @@max_connections'").output.strip()
        assert healthy.isdigit(), healthy
        assert ep.shell.run("mariadb -e 'SET GLOBAL max_connections = 5000'").ok
        assert failing() == ["server_settings_unchanged"]
        assert asked["config_unchanged"] == 0  # nothing it reads moved
        assert ep.shell.run(f"mariadb -e 'SET GLOBAL max_connections = {healthy}'").ok
        assert ep.shell.run("cp /usr/bin/true /usr/local/bin/ps").ok  # a program beside the image's
        assert failing() == ["programs_unchanged"]


@pytest.mark.live
def test_kept_sessions_answer_only_when_the_hosts_processes_moved(client, images, monkeypatch):
    """A quiet step does not ask the judge's kept sessions to echo (~4 ms a host): nothing
    in the host changed its processes, and only that (a kill, a stop) could break them. A
    session the host kills moves them: it is asked, found dead, replaced."""
    echoes: collections.Counter[str] = collections.Counter()
    answers = JudgeSessions._answers
    monkeypatch.setattr(
        JudgeSessions,
        "_answers",
        lambda self, shell, refresh=True: echoes.update(["asked"]) or answers(self, shell, refresh),
    )
    scenario = load_catalog()["easy_1"]
    with Episode(scenario, 1, client=client, images=images, run_id=f"test-facts-{time.monotonic_ns()}") as ep:
        assert ep.shell.run(render(scenario.solution, ep.faults), timeout=60).ok
        assert ep.progress().reward == 1.0
        assert ep.progress().reward == 1.0  # the sessions the first one opened are in the facts now
        echoes.clear()
        assert [ep.progress().reward for _ in range(3)] == [1.0] * 3
        assert echoes["asked"] == 0
        # root in the host kills every bash it did not start: the judge's sessions among them
        mine = ep.shell.run("echo $$").output.strip()
        killed = ep.shell.run(f"for p in $(pgrep -x bash); do [ $p != {mine} ] && kill -9 $p; done; true")
        assert killed.ok, killed.output
        assert ep.progress().reward == 1.0
        assert echoes["asked"] >= 1


def test_sock_diag_is_refused_where_the_namespace_cannot_be_entered():
    assert sockdiag.listeners(2**22 + 7) is None  # no such process: the caller reads /proc


@pytest.mark.live
def test_sock_diag_lists_what_the_proc_tables_list(live_host: LiveHost):
    """The host's TCP listeners and UDP sockets as sock_diag gives them are the ones its
    /proc/<pid>/net tables list: same ports, owners and inodes."""
    shell = live_host.shell(default_timeout=20)
    try:
        quiet = "</dev/null >/dev/null 2>&1 &"
        assert shell.run(f"setsid nc -l -p 8089 {quiet} setsid nc -u -l -p 5353 {quiet}").ok
        assert shell.run(until_listening(8089, 5353)).ok
        pid = live_host.facts()._pid  # type: ignore[union-attr]
        asked = sockdiag.listeners(pid)
        assert asked is not None, "root on this machine may enter a host's network namespace"
        listed = set()
        for table in ("tcp", "tcp6", "udp", "udp6"):
            with open(f"/proc/{pid}/net/{table}") as f:
                for line in f.read().splitlines()[1:]:
                    fields = line.split()
                    if table.startswith("udp") or fields[3] == "0A":
                        listed.add((int(fields[1].split(":")[1], 16), int(fields[7]), int(fields[9])))
        seen = {(int(port, 16), uid, inode) for _, _, _, port, _, uid, inode, _ in asked}
        assert seen == listed and {80, 8089, 5353} <= {port for port, _, _ in seen}, (seen, listed)
    finally:
        shell.close()


@contextlib.contextmanager
def _judged_both_ways(client, images, host: LiveHost, run_id: str, memo: dict | None = None):
    """Two probes through one judge's session on ``host``: one that reads through the judge
    alone (as off this machine), one that reads from this machine where it can."""
    from fixos.stack.inspector import HOST_ROOT
    from fixos.stack.judge import Judge
    from fixos.verifier.base import Probe

    with Judge(client, images["inspector"], run_id=run_id) as judge:
        session = judge.session(host)
        try:
            bare = type("Bare", (), {"name": host.name})()
            judged = Probe(backend.testinfra_host(session), session, bare, root=HOST_ROOT)
            here = Probe(backend.testinfra_host(session), session, host, root=HOST_ROOT, memo=memo)
            yield judged, here
        finally:
            session.close()


ODD_PROCESSES = (
    "( setsid sh -c '(sleep 0.1 &) ; exec sleep 1000' </dev/null >/dev/null 2>&1 & )",  # no zombie
    "( setsid sh -c 'sleep 0.1 & exec sleep 1001' </dev/null >/dev/null 2>&1 & )",  # a zombie
    "( setsid bash -c 'exec -a \"\" sleep 1002' </dev/null >/dev/null 2>&1 & )",  # argv[0] empty
    "( setsid bash -c $'exec -a \"x\\tY\\x7f\" sleep 1003' </dev/null >/dev/null 2>&1 & )",  # control chars
    # a deleted executable
    "cp /usr/bin/sleep /tmp/nap && ( setsid /tmp/nap 1004 </dev/null >/dev/null 2>&1 & ) && sleep 0.2",
    "rm /tmp/nap",
    "( setsid sh -c 'exec 2>/dev/null; sleep 1005' 'a (b) c' </dev/null >/dev/null 2>&1 & )",
)


def _beyond_sessions(procs: dict) -> dict:
    """The processes not under a session entered from outside (the reader's own among them)."""

    def outside(proc) -> bool:
        for _ in range(32):
            if proc.pid == 1 or proc.ppid == 1:
                return False
            if proc.ppid == 0 or proc.ppid not in procs:
                return True
            proc = procs[proc.ppid]
        return True

    return {pid: proc for pid, proc in procs.items() if not outside(proc)}


@pytest.mark.live
def test_processes_read_from_this_machine_are_the_judges_own_listing(client, images, live_host, test_run_id):
    """``nothing_new_running`` and ``processes_intact`` list a host's processes from this
    machine (``HostFacts.process_table``: its PID namespace, numbered as the host numbers
    them) instead of ``ps`` and ``find`` in the judge: with a zombie, an empty argv[0],
    control characters, a deleted executable, another user's processes and parentheses in
    a name, both listings agree on every process outside the readers' own sessions, and on
    each daemon's master as ``services_official`` finds it (the
    state by its kernel letter: ``ps`` adds flags no check reads)."""
    from fixos.verifier.integrity import DAEMONS, _look
    from fixos.verifier.running import _walk
    from fixos.verifier.system import _daemons

    shell = live_host.shell(default_timeout=30)
    try:
        assert shell.run(" && ".join(ODD_PROCESSES), timeout=30).ok
    finally:
        shell.close()
    time.sleep(0.4)
    with _judged_both_ways(client, images, live_host, test_run_id) as (judged, here):
        assert judged.process_table() is None and here.process_table() is not None
        by_ps, by_facts = _walk(judged), _walk(here)
        daemons_ps, daemons_facts = _daemons(judged), _daemons(here)
        names = list(DAEMONS)
        masters_walked, masters_here = _look(judged, names)[0], _look(here, names)[0]
    ps = {pid: dataclasses.replace(p, state=p.state[0]) for pid, p in _beyond_sessions(by_ps).items()}
    facts = _beyond_sessions(by_facts)
    assert ps == facts, set(ps.items()) ^ set(facts.items())
    args = {p.args for p in facts.values()}
    assert {"[sleep] <defunct>", "1002", "x?Y? 1003", "/tmp/nap 1004"} <= args, args
    assert any(p.exe == "/tmp/nap (deleted)" for p in facts.values())
    assert any(p.exe == "/usr/bin/dash" and "metrics-agent" in p.args for p in facts.values())
    assert daemons_ps - {"ps", "find"} == daemons_facts, daemons_ps ^ daemons_facts
    # services_official's masters: the judge's /proc walk and this machine's table agree
    assert masters_walked == masters_here and all(len(m) == 1 for m in masters_here.values()), masters_here


ODD_LISTENERS = (
    "setsid nc -l -p 8089",  # TCP on every address
    "setsid nc -6 -l -p 8090",  # TCP on IPv6
    "setsid nc -u -l -p 5353",  # UDP, unconnected
    "setsid nc -u 127.0.0.1 9",  # UDP, connected: listens to nobody
    "setsid nc -lU /run/odd.sock",  # a UNIX stream listener
    "setsid nc -luU /run/odd.dgram",  # a UNIX datagram socket
)


@pytest.mark.live
def test_listeners_read_from_this_machine_are_the_judges_own_listing(client, images, live_host, test_run_id):
    """``listeners_unchanged`` reads a host's listeners from this machine (sock_diag, its
    /proc/net/unix and each socket file's own entry in its root) instead of ``ss`` and
    ``stat`` in the judge: TCP on IPv4 and IPv6, UDP connected and not, UNIX stream and
    datagram sockets, one loosened to 666 and one whose file became a link: the same (an
    IPv6 wildcard that takes IPv4 too is `*`, as ss shows it)."""
    from fixos.verifier.posture import listeners

    shell = live_host.shell(default_timeout=30)
    try:
        quiet = " </dev/null >/dev/null 2>&1 &"
        assert shell.run(" ".join(f"{c}{quiet}" for c in ODD_LISTENERS) + " true", timeout=30).ok
        odd = ["/run/odd.sock", "/run/odd.dgram"]
        bound = until_listening(8089, 8090, 5353, peers=["127.0.0.1:9"], paths=odd)
        assert shell.run(bound, timeout=30).ok
        assert shell.run("chmod 666 /run/odd.sock && ln -sf /etc/hostname /run/php/php8.2-fpm.sock").ok
    finally:
        shell.close()
    with _judged_both_ways(client, images, live_host, test_run_id) as (judged, here):
        assert judged.listener_lines() is None and here.listener_lines() is not None
        by_ss, by_facts = listeners(judged), listeners(here)
    assert by_ss == by_facts, set(by_ss) ^ set(by_facts)
    assert {"tcp 0.0.0.0:8089", "tcp *:8090", "udp 0.0.0.0:5353", "unix /run/odd.sock 0:0 666"} <= set(
        by_facts
    ), by_facts
    assert "unix /run/php/php8.2-fpm.sock 0:0 777" in by_facts and "udp 127.0.0.1:" not in str(by_facts)


QUERIES = (
    "SELECT 1",
    "SELECT NULL, 'a\\tb', 'line\\nnext', 'back\\\\slash', '', 0x00, 'été'",
    "SELECT COUNT(*) FROM shop.orders; CHECKSUM TABLE shop.orders EXTENDED",
    "SELECT * FROM shop.no_such_table",
    "DO 1",
    "SELECT 1; SELECT * FROM shop.no_such_table",
    "SELECT LOWER(VARIABLE_NAME), VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES",
    "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema = 'shop'",
    "SELEC nonsense",
)


@pytest.mark.live
def test_sql_asked_from_this_machine_answers_as_the_judges_client(client, images, live_host, test_run_id):
    """``Probe.sql`` asks a host's MariaDB from this machine (the protocol in
    ``verifier/wire.py``) instead of a ``mariadb`` client in the judge: the same output and
    exit code for rows, NULLs and escapes, several statements, errors and statements
    without rows, and for a stopped server; no connection is left open (it would hold the
    admin's one slot past ``max_connections``, which the agent needs against a flood); and
    a socket the host turned into a link to this machine's engine is not followed."""
    with _judged_both_ways(client, images, live_host, test_run_id) as (judged, here):
        for query in QUERIES:
            by_cli, by_wire = judged.sql(query), here.sql(query)
            assert (by_wire.exit_code, by_wire.output) == (by_cli.exit_code, by_cli.output), query
        assert here._wire() is not None and judged._wire() is None
        roots = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'root'"
        assert here.sql(roots).output == "1\n", "only the question's own connection"
        assert live_host.run_program(["/bin/sh", "-c", "service mariadb restart"], timeout=60).ok
        assert here.sql("SELECT 2").output == "2\n"
        assert live_host.run_program(["/bin/sh", "-c", "service mariadb stop"], timeout=60).ok
        stopped_cli, stopped_wire = judged.sql("SELECT 1"), here.sql("SELECT 1")
        assert stopped_cli.exit_code == stopped_wire.exit_code == 1, (stopped_cli, stopped_wire)
        link = "ln -sf /var/run/docker.sock /run/mysqld/mysqld.sock"
        assert live_host.run_program(["/bin/sh", "-c", link]).ok
        linked = here.sql("SELECT 1")
        assert linked.exit_code == 1 and "HTTP" not in linked.output, linked


@pytest.mark.live
def test_identities_read_from_this_machine_are_the_judges_own_reading(client, images, live_host, test_run_id):
    """``identities_kept`` hashes a host's keys from this machine (inside its root) instead of
    the judge's find and sha256sum: both readings agree on keys, links, big files and names
    that only look alike."""
    from fixos.verifier.identities import identities

    shell = live_host.shell(default_timeout=30)
    try:
        assert shell.run(
            "mkdir -p /root/.ssh && echo 'ssh-ed25519 AAAAx a' > /root/.ssh/authorized_keys && "
            "ln -s /etc/hostname /root/.ssh/authorized_keys2 && "
            "head -c 1100000 /dev/zero > /root/.ssh/id_big && mkdir -p /root/.ssh/id_dir && "
            "echo x > /root/.ssh/id_dir/id_inner && echo y > /etc/ssh/not_a_key && "
            "mkfifo /root/.ssh/id_fifo"
        ).ok
    finally:
        shell.close()
    with _judged_both_ways(client, images, live_host, test_run_id) as (judged, here):
        assert judged.access.__class__.__name__ == "Bare"
        by_find, by_here = identities(judged), identities(here)
    assert by_find == by_here, set(by_find.items()) ^ set(by_here.items())
    assert by_here["/root/.ssh/authorized_keys2"] == "link" and by_here["/root/.ssh/id_big"] == "big"
    assert "/etc/ssh/ssh_host_ed25519_key" in by_here and "/root/.ssh/id_dir/id_inner" not in by_here


@pytest.mark.live
def test_port_owners_read_from_this_machine_are_ss_p_own(client, images, live_host, test_run_id):
    """``port_listening`` finds who holds a port from this machine (the socket's inode among
    the host's processes' descriptors) instead of the judge's ``ss -p``: the same verdict on
    a daemon's port, a squatter's, one held by two programs and one nobody holds."""
    from fixos.verifier import CHECKS

    shell = live_host.shell(default_timeout=30)
    try:
        assert shell.run("(setsid nc -l -p 4444 </dev/null >/dev/null 2>&1 &) && sleep 0.3").ok
    finally:
        shell.close()
    cases = [(80, "nginx"), (3306, "mariadbd"), (22, "sshd"), (4444, "nc"), (4444, "nginx"), (4445, None)]
    expected = [True, True, True, True, False, False]
    with _judged_both_ways(client, images, live_host, test_run_id) as (judged, here):
        assert judged.tcp_owners(80) is None and here.tcp_owners(80) == ["nginx"]
        for (port, program), passes in zip(cases, expected, strict=True):
            check = CHECKS.get("port_listening")(
                CHECKS.get("port_listening").Params(port=port, program=program)
            )
            by_ss, by_here = check.evaluate(judged, None), check.evaluate(here, None)
            assert by_ss.passed == by_here.passed == passes, (port, program, by_ss, by_here)
            assert by_ss.detail.split(" held by ")[-1] == by_here.detail.split(" held by ")[-1], (
                by_ss,
                by_here,
            )


_PARTS = st.sampled_from(["etc", "nginx", "ssl", "var", "log", "a", "nginxx", "root"])
_PATHS = st.lists(_PARTS, min_size=0, max_size=4).map(lambda parts: "/" + "/".join(parts))


@settings(max_examples=400, deadline=None)
@given(
    path=_PATHS,
    trees=st.lists(st.tuples(_PATHS, st.sampled_from(["", "/"])).map("".join), max_size=3),
    entries=st.lists(_PATHS, max_size=3),
)
def test_the_fast_relation_of_paths_is_the_plain_one(path, trees, entries):
    """``files`` filters a host's entries with ``_relation``; it must say what ``_related`` says."""
    assert _relation(trees, entries)(path) == _related(path, trees, entries)
