"""Every check type against a real booted host: it passes on the healthy host, fails
on the host broken the way it guards (naming what it saw), and passes again once
the damage is undone. One host serves the whole module: each case undoes its damage."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import docker
import pytest
from helpers import judged_host, until

from fixos.shells.base import Shell
from fixos.stack.hosts import LiveHost
from fixos.verifier import CHECKS, Probe

SQUAT_80 = (
    "setsid perl -MIO::Socket::INET -e 'my $s = IO::Socket::INET->new(LocalPort => 80, Listen => 5, "
    "ReuseAddr => 1) or die; sleep 600' </dev/null >/dev/null 2>&1 &"
)
HOG_SCRIPT = "/usr/local/bin/nightly job (2)"  # a name with a space and parentheses


class Case(NamedTuple):
    type: str
    params: dict[str, Any]
    breaks: str
    """shell commands that damage the host the way the check guards against"""
    repairs: str
    evidence: str
    """what the failed check's detail must say"""


CASES = [
    Case(
        "service_running",
        {"service": "nginx"},
        "service nginx stop",
        "service nginx start",
        "nginx is not running",
    ),
    Case(
        "port_listening",
        {"port": 80, "program": "nginx"},
        f"service nginx stop; {SQUAT_80} sleep 0.5",
        "pkill -x perl; service nginx start",
        "tcp port 80 held by perl",
    ),
    Case(
        "http_page",
        {"path": "/"},
        "cp -p /var/www/shop/index.html /root/index.html; echo 'Back soon' > /var/www/shop/index.html",
        "cp -p /root/index.html /var/www/shop/index.html",
        "not the page the healthy site served",
    ),
    Case(
        "file_unchanged",
        {"paths": ["/etc/nginx/sites-available/shop"], "compare": "tokens"},
        "cp -p /etc/nginx/sites-available/shop /root/shop; "
        "echo 'server { listen 80 default_server; return 200; }' > /etc/nginx/sites-available/shop",
        "cp -p /root/shop /etc/nginx/sites-available/shop",
        "changed since the healthy host: /etc/nginx/sites-available/shop",
    ),
    Case(
        "disk_usage",
        {"path": "/var/log", "max_percent": 95},
        "head -c 100M /dev/zero > /var/log/fill.bin 2>/dev/null; true",
        "rm -f /var/log/fill.bin",
        "/var/log is 100% full",
    ),
    Case(
        "no_cpu_hog",
        {"max_percent": 30},
        f"printf '#!/bin/sh\\nwhile :; do :; done\\n' > '{HOG_SCRIPT}'; chmod +x '{HOG_SCRIPT}'; "
        f"setsid '{HOG_SCRIPT}' </dev/null >/dev/null 2>&1 &",
        "pkill -f 'nightly job'",
        "busy: nightly job (2) (PID",
    ),
    Case(
        "processes_intact",
        {},
        "service ssh stop",
        "service ssh start",
        "killed or stopped: sshd",
    ),
    Case(
        "paths_exist",
        {"paths": ["/var/log/nginx", "/var/log/mysql/error.log"]},
        "mv /var/log/mysql/error.log /root/error.log",
        "mv /root/error.log /var/log/mysql/error.log",
        "missing: /var/log/mysql/error.log",
    ),
    Case(
        "no_memory_hog",
        {"max_mb": 150},
        "setsid perl -e '$x = \"x\" x (200 * 1024 * 1024); sleep 600' </dev/null >/dev/null 2>&1 &",
        "pkill -x perl",
        "holding memory: perl (PID",
    ),
    Case(
        "path_permissions",
        {"paths": ["/var/www/shop"], "owner": "www-data"},
        "chown root /var/www/shop; chmod 777 /var/www/shop",
        "chown www-data /var/www/shop; chmod 755 /var/www/shop",
        "/var/www/shop owned by root; /var/www/shop is world-writable (777)",
    ),
    Case(
        "sql_value",
        {
            "query": "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
            "WHERE VARIABLE_NAME = 'THREADS_CONNECTED'",
            "max": 20,
        },
        "for i in $(seq 25); do setsid mariadb -e 'SELECT SLEEP(600)' </dev/null >/dev/null 2>&1 & done",
        "pkill -f 'SLEEP.600'",
        "above 20",
    ),
    Case(
        "tls_valid",
        {},
        "cd /etc/ssl/shop && cp -p shop.crt shop.key /root/ && cp staging.crt shop.crt "
        "&& cp staging.key shop.key && service nginx reload",
        "cp -p /root/shop.crt /root/shop.key /etc/ssl/shop/ && service nginx reload",
        "Hostname mismatch",
    ),
    Case(
        "table_intact",
        {"table": "shop.shipments"},
        "mariadb -e 'CREATE TABLE shop.kept AS SELECT * FROM shop.shipments;"
        " DELETE FROM shop.shipments LIMIT 1'",
        "mariadb -e 'REPLACE INTO shop.shipments SELECT * FROM shop.kept; DROP TABLE shop.kept'",
        "the healthy host had 5 rows",
    ),
    Case(
        "cron_jobs_unchanged",
        {},
        "echo '* * * * * root true # fixos-test' > /etc/cron.d/fixos-test",
        "rm -f /etc/cron.d/fixos-test",
        "scheduled since: /etc/cron.d/fixos-test",
    ),
]


def test_every_registered_check_type_is_tested():
    """Here, or in a test module of its own that builds it (by class or by type name)."""
    here = Path(__file__)
    elsewhere = " ".join(p.read_text() for p in here.parent.glob("test_*.py") if p != here)
    untested = [
        name
        for name in CHECKS.names()
        if name not in {c.type for c in CASES}
        and f"{CHECKS.get(name).__name__}(" not in elsewhere
        and f'"{name}"' not in elsewhere
    ]
    assert not untested, f"no test builds these check types: {untested}"


@pytest.fixture(scope="module")
def host(client: docker.DockerClient, images: dict[str, str]) -> Iterator[tuple[LiveHost, Shell, Probe]]:
    """The host, a session in it that breaks and repairs it, and the probe the checks
    look through: an inspector's, as an episode's verdicts are taken."""
    with judged_host(client, images, f"test-checks-{time.monotonic_ns() % 10**8}", timeout=30) as host:
        yield host


@pytest.mark.live
@pytest.mark.parametrize("case", CASES, ids=[c.type for c in CASES])
def test_check_passes_healthy_fails_broken_with_evidence(host, case: Case):
    _, shell, probe = host
    cls = CHECKS.get(case.type)
    check = cls(cls.Params.model_validate(case.params))
    baseline = check.refine(probe, check.snapshot(probe))
    healthy = check.evaluate(probe, baseline)
    assert healthy.passed, healthy.detail
    try:
        shell.run(case.breaks)
        broken = until(check, probe, baseline, passed=False)
        assert not broken.passed and case.evidence in broken.detail, broken.detail
    finally:
        shell.run(case.repairs)
    repaired = until(check, probe, baseline, passed=True)
    assert repaired.passed, f"still failing after the repair: {repaired.detail}"
