"""Episodes judge from inspectors: what root does to the host's tools, shell and
processes changes what the verdict sees, never what it sees with.

Each hostile state is first shown to fool (or break) a look from inside the
host, so the test would fail if the verdict still looked from there.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from fixos.core.errors import ShellError
from fixos.episodes.episode import Episode
from fixos.episodes.inspection import KILLED, failing_disturbed, inspected
from fixos.episodes.phases import check_entries
from fixos.scenarios.catalog import load_catalog
from fixos.stack.hosts import LiveHost
from fixos.stack.inspector import Inspector
from fixos.verifier import (
    CheckEntry,
    backend,  # not its testinfra_host: pytest would collect the name
    judge,
)
from fixos.verifier.integrity import ServicesOfficial, init_retry, one_shot
from fixos.verifier.service import ServiceRunning

FORGED_SERVICE = "printf '#!/bin/sh\\necho \" * $1 is running\"\\nexit 0\\n' > /usr/sbin/service"


@pytest.fixture
def web(live_host: LiveHost) -> LiveHost:
    """conftest's host of its own, by the name the tests below speak of."""
    return live_host


def _service_running(client, host: LiveHost, image: str) -> bool:
    """service_running's verdict, from an inspector as an episode takes it."""
    params = ServiceRunning.Params(service="nginx")
    entry = CheckEntry("nginx runs", "service_running", "web", True, 1.0, params)
    with inspected(client, {"web": host}, image, patient=False) as looking:
        return judge([entry], looking.probes).verdict.solved


@pytest.mark.live
def test_root_in_the_host_cannot_write_or_read_the_inspectors_memory(client, images, web):
    with web.shell() as inside, Inspector(client, web, images["inspector"]) as inspector:
        pid = inspector.shell.run("builtin echo $$").output.strip()
        assert pid.isdigit() and inside.run(f"test -d /proc/{pid}").ok  # same PID namespace
        wrote = inside.run(f"printf x | dd of=/proc/{pid}/mem bs=1 seek=4194304 conv=notrunc 2>&1")
        assert not wrote.ok and "Permission denied" in wrote.output, wrote.output
        assert not inside.run(f"cat /proc/{pid}/maps").ok
        assert inspector.shell.run("builtin echo alive").output.strip() == "alive"


@pytest.mark.live
def test_a_forged_service_fools_the_host_but_not_the_verdict(client, images, web):
    with web.shell() as inside:
        inside.run(f"service nginx stop; {FORGED_SERVICE}; chmod 755 /usr/sbin/service")
        assert "nginx is running" in inside.run("service nginx status").output
        assert (
            backend.testinfra_host(inside, "web").service("nginx").is_running
        )  # how it fools a look from inside
        assert not _service_running(client, web, images["inspector"])
        inside.run("/etc/init.d/nginx start")
        assert _service_running(client, web, images["inspector"])


@pytest.mark.live
def test_a_host_without_bash_gets_a_verdict_not_an_error(client, images, test_run_id):
    easy_1 = load_catalog()["easy_1"]
    with Episode(easy_1, 1, client=client, images=images, run_id=test_run_id) as ep:
        ep.shell.run("service nginx start")
        ep.shell.run("rm -f /usr/bin/bash /bin/bash")
        with pytest.raises(ShellError):
            ep.host.shell()  # nothing in the host can start a bash session now
        verdict = ep.verify()
    checks = {c.name: c for c in verdict.checks}
    programs = checks["steady: programs and the loader are the image's"]
    assert not programs.passed and "bash" in programs.detail, programs.detail
    assert verdict.reward == 0.0
    scored = [c for c in verdict.checks if c.scored]
    assert scored and all(c.passed for c in scored), scored  # seen, with the inspector's own bash


@pytest.mark.live
def test_a_host_that_kills_its_inspector_scores_zero_not_invalid(client, images, web):
    checks = [c for c in check_entries(load_catalog()["easy_1"]) if c.host == "web"]
    inside = web.shell()
    inside.run("setsid bash -c 'while :; do kill -9 -1; done' </dev/null >/dev/null 2>&1 &")
    time.sleep(0.5)
    with contextlib.suppress(Exception):
        inside.close()  # killed by the loop too
    with inspected(client, {"web": web}, images["inspector"], patient=True) as looking:
        baseline = {c.name: None for c in checks}
        verdict = judge(checks, looking.probes, baseline).verdict
        disturbed = looking.disturbed()
    assert "web" in disturbed
    final = failing_disturbed(verdict, checks, disturbed)
    assert final.reward == 0.0
    assert all(not c.passed and c.detail.startswith(KILLED) for c in final.checks), final.checks


@pytest.mark.live
def test_daemons_judged_from_an_inspector_with_their_config_tests_run_in_the_host(client, images, web):
    check = ServicesOfficial(ServicesOfficial.Params())
    with web.shell() as inside, inspected(client, {"web": web}, images["inspector"], patient=True) as looking:
        probe = looking.probes["web"]
        assert not inside.run("readlink /proc/$(cat /run/mysqld/mysqld.pid)/exe").ok  # root inside: no ptrace
        baseline = check.refine(probe, check.snapshot(probe))
        assert baseline["healthy"]["mariadbd"]["exe"] == "/usr/sbin/mariadbd"  # the inspector reads it
        healthy = check.evaluate(probe, baseline)
        # the inspector has no nginx: a pass means the tests ran in the host
        assert healthy.passed, healthy.detail
        assert not looking.shells["web"].run("command -v nginx php-fpm8.2 mariadbd").ok
        # MariaDB's init script polls `mariadbd --print-defaults` while a start does not answer
        # (on after the durability restart gave up): helpers, never a second master.
        inside.run(
            "setsid sh -c 'while :; do /usr/sbin/mariadbd --print-defaults >/dev/null; done' "
            "</dev/null >/dev/null 2>&1 & echo $! > /tmp/helpers"
        )
        helped = [check.evaluate(probe, baseline) for _ in range(5)]
        inside.run("kill -- -$(cat /tmp/helpers)")
        assert all(o.passed for o in helped), [o.detail for o in helped]
        inside.run("echo 'bogus;' >> /etc/nginx/nginx.conf")
        broken = check.evaluate(probe, baseline)
    assert not broken.passed and 'unknown directive "bogus"' in broken.detail, broken.detail


def test_a_daemons_print_or_test_run_is_a_helper_and_a_copy_elsewhere_stays_a_master():
    assert one_shot("mariadbd", "/usr/sbin/mariadbd", "/usr/sbin/mariadbd --print-defaults")
    assert one_shot("nginx", "/usr/sbin/nginx", "/usr/sbin/nginx -t -q -g daemon on; master_process on;")
    healthy = "/usr/sbin/mariadbd --basedir=/usr --datadir=/var/lib/mysql --user=mysql"
    assert not one_shot("mariadbd", "/usr/sbin/mariadbd", healthy)
    assert not one_shot("mariadbd", "/opt/mariadbd", "/opt/mariadbd --print-defaults")  # not the package's
    assert not one_shot("nginx", "/usr/sbin/nginx", "nginx: master process /usr/sbin/nginx -g daemon on;")


def test_mariadbs_init_script_retry_is_a_helper_and_nothing_like_it_is():
    official = (
        "/usr/sbin/mariadbd --basedir=/usr --datadir=/var/lib/mysql --user=mysql "
        "--log-error=/var/log/mysql/error.log --pid-file=/run/mysqld/mysqld.pid"
    )
    retry = official.replace("/var/log/mysql/error.log", "/tmp/tmp.UVF8nSyHDn.err")  # as CI saw it
    under = ["mysqld_safe", "timeout", "mariadb", "rc", "init"]

    def seen(cmdline=retry, exe="/usr/sbin/mariadbd", chain=under, name="mariadbd"):
        return init_retry(name, {"exe": exe, "cmdline": cmdline, "chain": chain}, official)

    assert seen()
    assert not seen(official)  # its own log: a master, not a retry
    assert not seen(chain=["mysqld_safe", "init"])  # no timeout above it
    assert not seen(exe="/opt/mariadbd")  # not the package's binary
    assert not seen(retry.replace(".err", ".err.x"))
    assert not seen(retry + " --skip-grant-tables")  # a loosened server dressed as a retry
    assert not seen(retry.replace("--user=mysql", "--user=root"))
    assert not seen(name="nginx")
