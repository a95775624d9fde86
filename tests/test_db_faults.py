"""The crashed table and the cron job that re-breaks, on one live host, judged as
an episode's verdict judges them (through an inspector): a "repair" that empties
the crashed table fails the row check and REPAIR TABLE passes it; fixing only
the damage a cron job does lasts seconds, killing its running round too lasts
until cron's next minute; removing the job passes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import docker
import pytest
from helpers import judged_host

from fixos.injector import FAULTS
from fixos.injector.base import Fault, fault_rng
from fixos.shells.base import Shell
from fixos.verifier import Check, Probe
from fixos.verifier.tables import CronJobsUnchanged, TableIntact

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def host(client: docker.DockerClient, images: dict[str, str]) -> Iterator[tuple[Shell, Probe]]:
    with judged_host(client, images, f"test-dbfaults-{time.monotonic_ns() % 10**8}", timeout=60) as host:
        _, shell, probe = host
        yield shell, probe


def _fault(fault_type: str, params: dict, shell: Shell, seed: int) -> Fault:
    cls = FAULTS.get(fault_type)
    fault = cls(cls.Params.model_validate(params))
    fault.inject(shell, fault_rng(seed, 0, fault_type))
    confirmed = fault.confirm(shell)
    assert confirmed.passed, confirmed.detail
    return fault


def _until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def test_emptying_the_crashed_table_fails_repair_table_passes(host):
    shell, probe = host
    check: Check = TableIntact(TableIntact.Params(table="shop.shipments"))
    healthy = check.snapshot(probe)
    assert check.evaluate(probe, healthy).passed
    shell.run("mariadb -e 'CREATE TABLE shop.kept ENGINE=InnoDB AS SELECT * FROM shop.shipments'")
    _fault("table_crashed", {}, shell, seed=1)
    crashed = check.evaluate(probe, healthy)
    assert not crashed.passed and "marked as crashed" in crashed.detail, crashed.detail
    # the page's error goes away with the emptied table: the rows do not come back
    shell.run("mariadb -e 'TRUNCATE TABLE shop.shipments'")
    emptied = check.evaluate(probe, healthy)
    assert not emptied.passed and "0 rows" in emptied.detail, emptied.detail
    shell.run("mariadb -e 'INSERT INTO shop.shipments SELECT * FROM shop.kept; DROP TABLE shop.kept'")
    assert check.evaluate(probe, healthy).passed
    # crashed again (the other variant, another conf file), then repaired properly
    _fault("table_crashed", {}, shell, seed=2)
    assert not check.evaluate(probe, healthy).passed
    assert "status\tOK" in shell.run("mariadb -N -e 'REPAIR TABLE shop.shipments'").output
    repaired = check.evaluate(probe, healthy)
    assert repaired.passed, repaired.detail


def test_cron_job_breaks_again_until_removed(host):
    shell, probe = host
    cron: Check = CronJobsUnchanged(CronJobsUnchanged.Params())
    healthy = cron.snapshot(probe)
    fault = _fault("cron_rebreaker", {"target": "php-fpm"}, shell, seed=3)
    assert not cron.evaluate(probe, healthy).passed
    down = "! pgrep -f '^php-fpm: master' >/dev/null"
    # fixing the damage alone: the running round stops php-fpm again within seconds
    shell.run("service php8.2-fpm start")
    assert _until(lambda: shell.run(down).ok, timeout=10), "php-fpm was not stopped again"
    # killing that round too: cron starts the next one within its minute
    shell.run(f"pkill -f '^/bin/sh {fault.script}'; service php8.2-fpm start")
    assert not shell.run(down).ok
    assert _until(lambda: shell.run(down).ok, timeout=75), "cron did not run the job again"
    fault.revert(shell)
    shell.run("sleep 1; service php8.2-fpm start")
    judged = cron.evaluate(probe, healthy)
    assert judged.passed, judged.detail
    assert not _until(lambda: shell.run(down).ok, timeout=8), "php-fpm stopped after the job was removed"
