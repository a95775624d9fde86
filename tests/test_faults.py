"""Every fault type against a real booted host: inject, the symptom is confirmed;
revert, the symptom is gone."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fixos.injector import FAULTS
from fixos.injector.base import fault_rng

CASES = [
    ("service_stopped", {"service": "nginx"}),
    ("service_stopped", {"service": "mariadb"}),
    ("config_broken", {"service": "nginx"}),
    ("config_broken", {"service": "mariadb"}),
    ("disk_fill", {"path": "/var/log", "percent": 97}),
    ("cpu_hog", {"pids": [905, 906]}),
    ("port_squatter", {"port": 80, "pid": 930}),
    ("dependency_broken", {"link": "app_db"}),
    ("dependency_broken", {"link": "web_app"}),
    ("deleted_open_file", {"path": "/var/log", "percent": 96}),
    ("inodes_exhausted", {"path": "/var/log"}),
    ("permissions_broken", {"target": "web_root"}),
    ("permissions_broken", {"target": "datadir"}),
    ("connections_exhausted", {}),
    ("memory_hog", {}),
    ("service_killer", {"service": "nginx"}),
    ("tls_expired", {}),
    ("tls_wrong_name", {}),
    ("tls_key_mismatch", {}),
    ("fd_limit", {"service": "nginx"}),
    ("fd_limit", {"service": "php-fpm"}),
    ("fpm_pool_broken", {}),
    ("table_crashed", {}),
    ("cron_rebreaker", {"target": "php-fpm"}),
    ("logrotate_broken", {"percent": 85}),
]


# multi-host network faults: live in test_network_faults.py (a 3-host stack)
MULTI_HOST = {"firewall_blocks", "db_bind_local", "db_host_wrong", "link_throttled"}
# needs a host whose /tmp is a tmpfs of its own: live in test_housekeeping.py
OWN_TMP = {"tmp_full"}


def test_every_registered_fault_type_is_tested():
    assert {t for t, _ in CASES} | MULTI_HOST | OWN_TMP == set(FAULTS.names())
    here = Path(__file__)
    elsewhere = " ".join(p.read_text() for p in here.parent.glob("test_*.py") if p != here)
    assert [t for t in sorted(MULTI_HOST | OWN_TMP) if f'"{t}"' not in elsewhere] == []


def eventually(check, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        outcome = check()
        if outcome.passed or time.monotonic() > deadline:
            return outcome
        time.sleep(0.2)


@pytest.mark.live
@pytest.mark.parametrize(
    ("fault_type", "params"), CASES, ids=[f"{t}-{'-'.join(map(str, p.values()))}" for t, p in CASES]
)
def test_inject_confirm_revert(live_host, fault_type, params, seed=1):
    cls = FAULTS.get(fault_type)
    fault = cls(cls.Params.model_validate(params))
    with live_host.shell() as shell:
        rng = fault_rng(seed, 0, fault_type)
        fault.prepare(shell, rng)
        fault.inject(shell, rng)
        confirmed = eventually(lambda: fault.confirm(shell))
        assert confirmed.passed, confirmed.detail
        fault.revert(shell)
        cleared = eventually(lambda: type(confirmed)(not fault.confirm(shell).passed, ""))
        assert cleared.passed, f"symptom still there after revert: {fault.confirm(shell).detail}"


@pytest.mark.live
def test_the_batch_jobs_sessions_are_idle_and_come_back_when_killed(live_host, seed=1):
    """connections_exhausted holds idle sessions, not running queries: a server stopping
    with 40 clients in ``SELECT SLEEP`` waited 2-16 s for them (an idle one ends at once);
    and killing the sessions alone is no repair: the job opens them again within a second."""
    cls = FAULTS.get("connections_exhausted")
    fault = cls(cls.Params())
    with live_host.shell() as shell:
        rng = fault_rng(seed, 0, "connections_exhausted")
        fault.prepare(shell, rng)
        fault.inject(shell, rng)
        assert eventually(lambda: fault.confirm(shell)).passed
        sessions = (
            "SELECT COMMAND, COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'reports' GROUP BY 1"
        )
        rows = dict(line.split("\t") for line in shell.run(f'mariadb -N -e "{sessions}"').output.splitlines())
        assert list(rows) == ["Sleep"] and int(rows["Sleep"]) >= fault.limit - 1, rows
        shell.run("mariadb -e 'KILL USER reports'")
        assert eventually(lambda: fault.confirm(shell), timeout=5).passed, (
            "the job did not take its sessions back"
        )
        fault.revert(shell)
        assert eventually(lambda: type(fault.confirm(shell))(not fault.confirm(shell).passed, "")).passed
