"""The inspector: a vantage point on a host that root inside the host cannot alter.

Each hostile state is made inside a fresh host first, and shown to defeat the
host's own tools; the inspector must still see the host's daemons, their
sockets, its files and its data, with its own tools.
"""

from __future__ import annotations

import os
import re
import secrets
import time
from collections.abc import Iterator

import docker
import pytest

from fixos.core.errors import StackError
from fixos.scenarios.schema import HostSpec
from fixos.shells.base import Shell
from fixos.stack.hosts import LABEL_RUN, LiveHost, Stack
from fixos.stack.inspector import (
    HOST_ROOT,
    LABEL_ROLE,
    ROLE,
    SERVICE_DAEMONS,
    Inspector,
    filesystem_use_command,
    host_path,
    inspecting,
    inspector_image,
    mariadb_command,
    service_running_command,
)
from fixos.verifier.backend import testinfra_host as infra_host
from fixos.verifier.base import CHECKS, Probe
from fixos.verifier.exits import dying_on

APP_INI = "/etc/shop/app.ini"
PIDS = 256
"""the hostile host's PID limit: small, so a fork bomb fills it fast."""


# -- without an engine --------------------------------------------------------


def test_host_path_prefixes_the_hosts_init_root():
    assert host_path("/var/log/nginx/error.log") == f"{HOST_ROOT}/var/log/nginx/error.log"
    with pytest.raises(ValueError, match="absolute"):
        host_path("etc/passwd")


def test_sql_uses_the_hosts_socket_and_no_option_file():
    command = mariadb_command("SELECT 'a b'")
    assert command.startswith("mariadb --no-defaults ")
    assert f"--socket={HOST_ROOT}/run/mysqld/mysqld.sock" in command
    assert command.endswith("-e 'SELECT '\"'\"'a b'\"'\"''")


def test_a_shell_before_start_is_an_error(client_free_host):
    with pytest.raises(StackError, match="not started"):
        _ = Inspector(None, client_free_host, "none").shell  # type: ignore[arg-type]


def test_service_and_filesystem_commands_refuse_what_they_do_not_know():
    with pytest.raises(ValueError, match="known: nginx"):
        service_running_command("apache2")
    with pytest.raises(ValueError, match="metric"):
        filesystem_use_command("/var/log", "blocks")
    assert all(daemon.startswith("/usr/sbin/") for _, daemon in SERVICE_DAEMONS.values())


@pytest.fixture
def client_free_host() -> LiveHost:
    from fixos.core.models import HostHandle

    return LiveHost(None, HostHandle("web", "0" * 64, {}), None)  # type: ignore[arg-type]


# -- live ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def image(client: docker.DockerClient) -> str:
    return inspector_image(client, lambda line: None)


@pytest.fixture
def host(client: docker.DockerClient, images: dict[str, str], test_run_id: str) -> Iterator[LiveHost]:
    """A booted host with a small PID limit; after it is removed, none of its
    processes (a fork bomb's included) is left on the machine."""
    spec = HostSpec(name="web", pids=PIDS)
    stack = Stack(client, run_id=test_run_id, episode_id=test_run_id, hosts=[spec], images=images)
    try:
        stack.up()
        yield stack.hosts["web"]
    finally:
        container_id = stack.hosts["web"].handle.container_id if "web" in stack.hosts else ""
        stack.down()
        cgroup = f"/sys/fs/cgroup/pids/docker/{container_id}"
        if container_id and os.path.isdir("/sys/fs/cgroup/pids/docker"):
            deadline = time.monotonic() + 20
            while os.path.isdir(cgroup) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not os.path.isdir(cgroup), "the host's processes outlived it"


def in_host(client: docker.DockerClient, host: LiveHost, script: str) -> tuple[int | None, str]:
    """Run ``script`` with the host's own /bin/sh (never bash: a state may have removed it)."""
    try:
        code, out = client.containers.get(host.handle.container_id).exec_run(["/bin/sh", "-c", script])
    except docker.errors.APIError as exc:  # no PID left to start the exec with
        return None, str(exc)
    return code, out.decode(errors="replace")


def move_bash_away(client, host):
    # Debian's /bin is /usr/bin: one move takes both names.
    assert in_host(client, host, "mv /usr/bin/bash /usr/bin/bash.away")[0] == 0
    code, _ = in_host(client, host, "bash -c true")
    assert code == 127


def lying_tools(client, host):
    liar = "#!/bin/sh\\necho all-quiet\\nexit 0\\n"
    tools = "/usr/bin/ps /usr/bin/ss /usr/sbin/service /usr/bin/pgrep"
    assert in_host(client, host, f"for t in {tools}; do printf '{liar}' > $t; chmod 755 $t; done")[0] == 0
    assert in_host(client, host, "ps -e; ss -ltnp")[1] == "all-quiet\nall-quiet\n"


def preload_breaks_programs(client, host):
    # A PHP extension's data symbols resolve nowhere else: every dynamic
    # program, the host's sh and bash included, dies with a symbol lookup error.
    assert in_host(client, host, "echo /usr/lib/php/*/mysqli.so > /etc/ld.so.preload")[0] == 0
    code, out = in_host(client, host, "true")
    assert code == 127, out


def fork_bomb(client, host):
    api = client.api
    # A shell's loop cannot hold the table full: dash exits on its first failed
    # fork and hands a PID back (CI saw 252 of 256 for 60 s). perl's fork returns
    # undef instead, so these loops retake every PID that comes free.
    bomb = (
        "for i in 1 2 3 4; do perl -e 'while (1) { my $p = fork; "
        "if (!defined $p) { select(undef, undef, undef, 0.05) } elsif ($p == 0) { sleep 1000; exit } }' & "
        "done; wait"
    )
    api.exec_start(api.exec_create(host.handle.container_id, ["/bin/sh", "-c", bomb]), detach=True)
    deadline, count = time.monotonic() + 60, 0
    while time.monotonic() < deadline:
        count = host_pids(client, host)
        if count >= PIDS - 2:
            return
        time.sleep(0.2)
    pytest.fail(f"the fork bomb did not fill the host's PID limit: {count} of {PIDS} tasks")


def host_pids(client: docker.DockerClient, host: LiveHost) -> int:
    """Tasks in the host's cgroup: the cgroup file where the engine is local, else the engine's stats."""
    try:
        with open(f"/sys/fs/cgroup/pids/docker/{host.handle.container_id}/pids.current") as f:
            return int(f.read())
    except OSError:
        stats = client.containers.get(host.handle.container_id).stats(stream=False)
        return int(stats.get("pids_stats", {}).get("current", 0))


def fill_var_log(client, host):
    in_host(client, host, "dd if=/dev/zero of=/var/log/fill bs=1M 2>/dev/null; true")
    code, out = in_host(client, host, "df --output=avail /var/log | tail -1")
    assert code == 0 and out.strip() == "0", out


HOSTILE = {
    "bash_removed": move_bash_away,
    "lying_tools": lying_tools,
    "ld_so_preload": preload_breaks_programs,
    "fork_bomb": fork_bomb,
    "var_log_full": fill_var_log,
}


def sees_the_host(shell: Shell, app_ini: bytes) -> dict[str, str]:
    """Asserts what a session from outside the host (an inspector's, the judge's) sees of it
    whatever root did inside: its daemons, every nginx on port 80, its files, its data, its
    services. Returns its TCP listeners (``ss`` lines) by port."""
    procs = shell.run("ps -eo comm=")
    assert procs.ok, procs.output
    assert {"init", "nginx", "mariadbd"} <= set(procs.output.split())
    sockets = shell.run("ss -Hltnp").output
    by_port = {line.split()[3].rsplit(":", 1)[1]: line for line in sockets.splitlines()}
    # Every nginx holds port 80, the www-data workers too (needs DAC_READ_SEARCH).
    nginx = set(shell.run("ps -C nginx -o pid=").output.split())
    assert len(nginx) >= 2 and set(re.findall(r'"nginx",pid=(\d+)', by_port["80"])) == nginx, sockets
    read = shell.run(f"cat {host_path(APP_INI)}")
    assert read.ok and read.output == app_ini.decode(), read.output
    sql = shell.run(mariadb_command("SELECT COUNT(*) FROM shop.orders WHERE status = 'pending'"))
    assert sql.ok and sql.output.strip() == "3", sql.output
    for service in ("nginx", "mariadb", "php8.2-fpm"):
        assert shell.run(service_running_command(service)).ok, service
    return by_port


@pytest.mark.live
@pytest.mark.parametrize("state", list(HOSTILE))
def test_the_inspector_sees_the_host_whatever_root_did_to_it(client, host, image, state):
    app_ini = host.read_file(APP_INI)  # through the engine, before anything is broken
    assert app_ini
    code, log_use = in_host(client, host, "df --output=pcent /var/log | tail -n 1")
    assert code == 0
    HOSTILE[state](client, host)
    with Inspector(
        client, host, image, default_timeout=60
    ) as inspector:  # a fork bomb beside it on a loaded CI machine
        shell = inspector.shell
        by_port = sees_the_host(shell, app_ini)
        assert '"mariadbd"' in by_port["3306"], by_port

        full = "100%" if state == "var_log_full" else log_use.strip()
        assert shell.run(filesystem_use_command("/var/log")).output.strip() == full

        # Its own bash, in its own cgroup, whatever the host has.
        mine = shell.run("cat /proc/$$/cgroup")
        assert inspector.container_id in mine.output and host.handle.container_id not in mine.output


@pytest.mark.live
def test_the_inspector_has_its_own_read_only_root_and_few_caps(client, host, image):
    with Inspector(client, host, image) as inspector:
        attrs = client.api.inspect_container(inspector.container_id)["HostConfig"]
        assert attrs["ReadonlyRootfs"] and attrs["CapDrop"] == ["ALL"]
        assert sorted(attrs["CapAdd"]) == ["CAP_DAC_READ_SEARCH", "CAP_SYS_PTRACE"] or sorted(
            attrs["CapAdd"]
        ) == ["DAC_READ_SEARCH", "SYS_PTRACE"]
        assert attrs["PortBindings"] in (None, {})
        assert attrs["PidsLimit"] and attrs["PidsLimit"] < PIDS
        out = inspector.shell.run("touch /usr/bin/x 2>&1; echo ok > /tmp/x && cat /tmp/x")
        assert "Read-only file system" in out.output and out.output.endswith("ok\n")


def labelled_inspectors(client: docker.DockerClient, run_id: str) -> list[str]:
    filters = {"label": [f"{LABEL_RUN}={run_id}", f"{LABEL_ROLE}={ROLE}"]}
    return [c.name for c in client.containers.list(all=True, filters=filters, ignore_removed=True)]


@pytest.mark.live
def test_the_inspector_is_removed_even_after_a_timeout_or_an_error(client, host, image, test_run_id):
    with Inspector(client, host, image) as inspector:
        assert labelled_inspectors(client, test_run_id) == [
            client.containers.get(inspector.container_id).name
        ]
        stuck = inspector.shell.run("sleep 30", timeout=1)
        assert stuck.timed_out
        # A builtin loop ignores the kill of its children: the session is replaced.
        spin = inspector.shell.run("while :; do :; done", timeout=1)
        assert spin.timed_out
        assert inspector.shell.run("echo alive").output == "alive\n"
    assert labelled_inspectors(client, test_run_id) == []

    with pytest.raises(RuntimeError), Inspector(client, host, image):
        raise RuntimeError("a check blew up")
    assert labelled_inspectors(client, test_run_id) == []


@pytest.mark.live
def test_an_inspector_for_a_host_that_is_gone_fails_cleanly(client, image, test_run_id):
    from fixos.core.models import HostHandle

    ghost = LiveHost(client, HostHandle("web", secrets.token_hex(32), {}), None)  # type: ignore[arg-type]
    with (
        pytest.raises(StackError, match="cannot start an inspector for host web"),
        Inspector(client, ghost, image),
    ):
        pass


@pytest.mark.live
def test_inspecting_starts_one_per_host_and_removes_all_even_when_one_fails(client, host, image, test_run_id):
    with inspecting(client, {"a": host, "b": host}, image) as inspectors:
        assert sorted(inspectors) == ["a", "b"]
        assert len(labelled_inspectors(client, test_run_id)) == 2
        assert all(i.shell.run("echo up").output == "up\n" for i in inspectors.values())
    assert labelled_inspectors(client, test_run_id) == []

    from fixos.core.models import HostHandle

    ghost = LiveHost(client, HostHandle("ghost", secrets.token_hex(32), {}), None)  # type: ignore[arg-type]
    with pytest.raises(StackError, match="host ghost"), inspecting(client, {"a": host, "b": ghost}, image):
        pass
    assert labelled_inspectors(client, test_run_id) == []


def _check(type_: str, **params):
    cls = CHECKS.get(type_)
    return cls(cls.Params(**params))


@pytest.mark.live
def test_process_and_socket_checks_judge_right_from_the_inspector_and_wrong_from_inside(client, host, image):
    """The checks that read only /proc and sockets run unchanged over an inspector's session."""
    listening = _check("port_listening", port=80, program="nginx")
    intact = _check("processes_intact")
    with Inspector(client, host, image) as inspector:
        probe = Probe(infra_host(inspector.shell, "web"), inspector.shell, host, patient=False)
        healthy = intact.snapshot(probe)
    assert {"init", "nginx", "mariadbd", "php-fpm8.2"} <= set(healthy)

    lying_tools(client, host)
    inside = host.shell()
    try:
        # as the exported verifier sees it: the host's own tools, nothing read from this machine
        in_host_only = type("InHostOnly", (), {"name": "web"})()
        from_inside = Probe(infra_host(inside, "web"), inside, in_host_only, patient=False)  # type: ignore[arg-type]
        assert not listening.evaluate(from_inside, None).passed  # the host's `ss` lies
    finally:
        inside.close()

    with Inspector(client, host, image) as inspector:
        probe = Probe(infra_host(inspector.shell, "web"), inspector.shell, host, patient=False)
        seen = listening.evaluate(probe, None)
        assert seen.passed, seen.detail
        assert intact.evaluate(probe, healthy).passed
        assert _check("no_memory_hog").evaluate(probe, None).passed
        assert _check("port_listening", port=3306, program="mariadbd").evaluate(probe, None).passed
        assert dying_on(inspector.shell) == []


@pytest.mark.live
def test_a_stopped_service_and_a_filling_disk_show_from_the_inspector(client, host, image):
    with Inspector(client, host, image) as inspector:
        shell = inspector.shell
        assert shell.run(service_running_command("nginx")).ok
        assert in_host(client, host, "kill -KILL $(cat /run/nginx.pid)")[0] == 0
        # The killed master is gone once the kernel reaps it: poll, a few seconds at most.
        gone = (
            f"for i in $(seq 100); do {service_running_command('nginx')} || exit 0; sleep 0.05; done; exit 1"
        )
        assert shell.run(f"( {gone} )").ok
        assert shell.run(service_running_command("mariadb")).ok

        in_host(client, host, "dd if=/dev/zero of=/var/log/half bs=1M count=30 2>/dev/null")
        code, df = in_host(client, host, "df --output=pcent,ipcent /var/log | tail -n 1")
        space, inodes = df.split()
        assert code == 0 and int(space.rstrip("%")) > 50
        assert shell.run(filesystem_use_command("/var/log")).output.strip() == space
        assert shell.run(filesystem_use_command("/var/log", "inodes")).output.strip() == inodes
