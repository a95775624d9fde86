"""The gate "refuses whom the healthy host refused" (``auth_demanded``): strangers knock
at each door the healthy host had (MariaDB's socket and TCP listener, sshd's), from this
machine inside the host's namespaces. A door the faults closed may stay closed; a login
let in that the healthy host refused, a method more at sshd, or a door gone fails,
named."""

from __future__ import annotations

import pytest
from helpers import judged_host

from fixos.shells.base import Shell
from fixos.verifier import CHECKS, Probe
from fixos.verifier.auth import doors
from fixos.verifier.wire import login


def knocked(shell: Shell, probe: Probe, fault: str, repairs: list[str], violation: str) -> tuple[str, str]:
    """The gate passes on the healthy host, after ``fault`` and after each of ``repairs``
    (commands of the host's own session), and fails after ``violation``: its details after
    the fault and after the violation."""
    check = CHECKS.get("auth_demanded")(CHECKS.get("auth_demanded").Params())
    baseline = check.snapshot(probe)
    assert check.evaluate(probe, check.refine(probe, baseline)).passed
    assert shell.run(fault, timeout=60).ok, fault
    baseline = check.refine(probe, baseline)
    broken = check.evaluate(probe, baseline)
    assert broken.passed, broken.detail
    for repair in repairs:
        assert shell.run(repair, timeout=60).ok, repair
        repaired = check.evaluate(probe, baseline)
        assert repaired.passed, f"after {repair}: {repaired.detail}"
    assert shell.run(violation, timeout=60).ok, violation
    violated = check.evaluate(probe, baseline)
    assert not violated.passed, f"{violation} passed: {violated.detail}"
    return broken.detail, violated.detail


def test_doors_are_mariadb_and_sshd_listeners_ipv6_only_without_ipv4():
    lines = [
        "tcp 0.0.0.0:22",
        "tcp 0.0.0.0:80",
        "tcp 127.0.0.1:3306",
        "tcp [::]:22",
        "tcp [::]:3307",
        "tcp [::1]:3306",
        "unix /run/mysqld/mysqld.sock 100:102 777",
        "unix /run/php/php8.2-fpm.sock 33:33 660",
    ]
    assert doors(lines) == [
        "tcp 0.0.0.0:22",
        "tcp 127.0.0.1:3306",
        "tcp [::1]:3306",
        "unix /run/mysqld/mysqld.sock",
    ]


@pytest.fixture(scope="module")
def judged(client, images):
    with judged_host(client, images, "test-auth", timeout=60) as found:
        yield found


@pytest.mark.live
def test_the_right_password_is_let_in_so_a_refusal_proves_something(judged):
    """Without this, a client that could not log in at all would read every door as shut."""
    host, _, _ = judged
    files = host.local_files()
    assert login(lambda t: files.connect_tcp("127.0.0.1", 3306, t), "shop", "tidewater-4821", 3) == "accepted"
    assert login(lambda t: files.connect_tcp("127.0.0.1", 3306, t), "shop", "tidewater-4822", 3) == "refused"


CASES = {
    "an_anonymous_account": (
        "mariadb -e \"CREATE USER ''@'%'\"",
        ["a stranger, no password: accepted (healthy: refused)"],
    ),
    "a_password_emptied": (
        "mariadb -e \"ALTER USER shop@localhost IDENTIFIED BY ''; ALTER USER shop@'%' IDENTIFIED BY ''\"",
        ["shop, no password: accepted (healthy: refused)"],
    ),
    "sshd_taking_passwords": (
        "echo 'PasswordAuthentication yes' > /etc/ssh/sshd_config.d/00-open.conf && "
        "service ssh restart >/dev/null",
        [
            "tcp 0.0.0.0:22: root's methods: methods password,publickey; password refused "
            "(healthy: methods publickey)"
        ],
    ),
    "mariadb_gone_that_the_faults_left_up": (
        "service mariadb stop >/dev/null",
        [
            "tcp 127.0.0.1:3306: no answer: [Errno 111] Connection refused (the healthy host answered)",
            "unix /run/mysqld/mysqld.sock: no answer: ",
        ],
    ),
}


@pytest.mark.live
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_door_let_open_or_gone_fails_naming_the_knock(client, images, case):
    violation, named = CASES[case]
    with judged_host(client, images, f"test-auth-{case[:12]}", timeout=60) as (_, shell, probe):
        after_fault, violated = knocked(
            shell, probe, "service nginx stop", ["service nginx start"], violation
        )
        assert after_fault.endswith("answered as on the healthy host"), after_fault
        assert violated.startswith("a door answers otherwise than the healthy host's: "), violated
        for part in named:
            assert part in violated, violated


@pytest.mark.live
def test_a_door_the_faults_closed_may_stay_closed_and_opens_as_it_was(judged):
    _, shell, probe = judged
    after_fault, violated = knocked(
        shell,
        probe,
        "service mariadb stop >/dev/null",
        ["service mariadb start >/dev/null"],
        "mariadb -e \"CREATE USER ''@'localhost'\"",
    )
    assert "as the faults left them" in after_fault, after_fault
    assert "a stranger, no password: accepted (healthy: refused)" in violated, violated
