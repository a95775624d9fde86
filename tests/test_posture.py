"""The gates on what a host lets in and what its daemons run with: configuration
trees, listeners, MariaDB's running settings. Each passes on a healthy host and
on what the faults left, and fails naming the loosening a repair added."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest
from helpers import gate_violated, until_listening

from fixos.core.models import CommandResult
from fixos.verifier import Probe
from fixos.verifier.configuration import config_files
from fixos.verifier.posture import LISTED, READ_TRIES, _listeners_now, _maybe_connecting, listeners


class _Canned:
    """A shell that answers every command with one output (for the parsers)."""

    def __init__(self, outputs: list[str]) -> None:
        self.outputs = outputs

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        return CommandResult(command=command, exit_code=0, output=self.outputs.pop(0), duration=0.0)


def test_config_files_hash_tokens_not_layout() -> None:
    listing = (
        "E\tf\t40\tetc/nginx/nginx.conf\t\n"
        "E\tl\t30\tetc/nginx/sites-enabled/shop\t/etc/nginx/sites-available/shop\n"
        "E\tf\t0\tetc/nginx/empty.conf\t\n"
    )
    one = listing + "F\tetc/nginx/nginx.conf\nT\tuser www-data;\nT\tworker_processes auto;\n"
    same = listing + "F\tetc/nginx/nginx.conf\nT\tuser www-data;\nT\tworker_processes auto;\n"
    other = listing + "F\tetc/nginx/nginx.conf\nT\tuser root;\nT\tworker_processes auto;\n"
    probe = Probe(None, _Canned([one, same, other]), None)  # type: ignore[arg-type]
    first, second, third = (config_files(probe, ["/etc/nginx"]) for _ in range(3))
    assert first == second
    assert first["/etc/nginx/sites-enabled/shop"] == "l /etc/nginx/sites-available/shop"
    assert first["/etc/nginx/empty.conf"].startswith("f ")
    assert third["/etc/nginx/nginx.conf"] != first["/etc/nginx/nginx.conf"]


def test_listeners_name_address_and_socket_mode() -> None:
    ss = "tcp 0.0.0.0:80\ntcp 127.0.0.1:3306\nudp 127.0.0.11:41234\nunix /run/php/php8.2-fpm.sock\n"
    stat = "/proc/1/root/run/php/php8.2-fpm.sock 33:33 660\n"
    probe = Probe(None, _Canned([ss + LISTED, stat + LISTED]), None, root="/proc/1/root")  # type: ignore[arg-type]
    assert listeners(probe) == [
        "tcp 0.0.0.0:80",
        "tcp 127.0.0.1:3306",
        "udp 127.0.0.11:41234",  # the engine's resolver: the gate leaves it out, not the reading
        "unix /run/php/php8.2-fpm.sock 33:33 660",
    ]


def test_listeners_not_read_to_the_end_are_unknown_not_gone() -> None:
    """A reading cut short (an exported task's peer over ssh under load once gave nothing,
    and every listener read as gone) is asked again, then fails as unreadable."""
    cut = _Canned(["tcp 0.0.0.0:22\n"] * READ_TRIES)
    with pytest.raises(RuntimeError, match="could not read the listeners"):
        listeners(Probe(None, cut, None, root="/proc/1/root"))  # type: ignore[arg-type]
    assert cut.outputs == []
    late = _Canned(["", "tcp 0.0.0.0:22\n" + LISTED])
    assert listeners(Probe(None, late, None, root="/proc/1/root")) == ["tcp 0.0.0.0:22"]  # type: ignore[arg-type]


# -- on a live host -------------------------------------------------------------


def _problems(kind: str, probe: Probe, fault: str, repairs: list[str], violation: str) -> list[str]:
    """The problems the gate names (its detail's list) after ``violation``; it passes after
    ``fault`` and after each of ``repairs`` (``gate_violated``)."""
    _, violated = gate_violated(kind, probe, fault, repairs, violation)
    return violated.split(": ", 1)[1].split("; ")


@dataclass(frozen=True)
class Loosening:
    """A gate on a live host that passes after ``fault`` and after each of ``repairs``, and
    after ``violation`` names exactly ``problems``."""

    gate: str
    fault: str
    repairs: list[str]
    violation: str
    problems: list[str]


LOOSENINGS = {
    "config_a_drop_in_beside_the_official_files": Loosening(
        "config_unchanged",
        fault="sed -i 's/^\\(\\s*\\)sendfile on;/\\1sendfile off;/' /etc/nginx/nginx.conf",
        repairs=[
            # left as the fault left it, then repaired with other blanks and a comment: both pass
            "sed -i 's/^\\(\\s*\\)sendfile off;/\\1sendfile    on;  # back/' /etc/nginx/nginx.conf",
        ],
        violation="printf '[mysqld]\\nmax_connections = 2000\\n' > /etc/mysql/mariadb.conf.d/99-zz.cnf && "
        "echo 'server_tokens on;' > /etc/nginx/conf.d/zz.conf && rm /etc/nginx/sites-enabled/shop && "
        "echo 'PermitEmptyPasswords yes' >> /etc/ssh/sshd_config",
        problems=[
            "added: /etc/mysql/mariadb.conf.d/99-zz.cnf (new line 'max_connections = 2000' (+1 more)), "
            "/etc/nginx/conf.d/zz.conf (new line 'server_tokens on;')",
            "deleted: /etc/nginx/sites-enabled/shop",
            "changed: /etc/ssh/sshd_config (new line 'PermitEmptyPasswords yes')",
        ],
    ),
    "config_a_second_root_account_and_pam_permit": Loosening(
        "config_unchanged",
        fault="sed -i 's/^\\(\\s*\\)sendfile on;/\\1sendfile off;/' /etc/nginx/nginx.conf",
        repairs=["sed -i 's/^\\(\\s*\\)sendfile off;/\\1sendfile on;/' /etc/nginx/nginx.conf"],
        violation="useradd -o -u 0 -g 0 -M -d /root -s /bin/bash toor && passwd -d toor >/dev/null && "
        "sed -i 's/^auth.*pam_unix.so.*/auth sufficient pam_permit.so/' /etc/pam.d/common-auth",
        # a password hash is never shown: the account's name only
        problems=[
            "changed: /etc/pam.d/common-auth (new line 'auth sufficient pam_permit.so', 1 line(s) gone), "
            "/etc/passwd (new line 'toor:x:0:0::/root:/bin/bash'), /etc/shadow (new line 'toor:...')"
        ],
    ),
    "settings_a_limit_raised_at_runtime": Loosening(
        "server_settings_unchanged",
        fault="mariadb -e 'SET GLOBAL local_infile = 0'",
        repairs=["mariadb -e 'SET GLOBAL local_infile = 1'"],  # the healthy value is accepted too
        violation="mariadb -e 'SET GLOBAL max_connections = 2000; SET GLOBAL wait_timeout = 5'",
        problems=["changed: max_connections = '2000' (was '40'), wait_timeout = '5' (was '28800')"],
    ),
}


@pytest.mark.live
@pytest.mark.parametrize("case", list(LOOSENINGS.values()), ids=list(LOOSENINGS))
def test_a_loosening_fails_naming_exactly_what_changed(probe: Probe, case: Loosening) -> None:
    assert _problems(case.gate, probe, case.fault, case.repairs, case.violation) == case.problems


@pytest.mark.live
def test_listeners_a_wider_bind_a_new_port_and_a_looser_socket_fail(probe: Probe) -> None:
    new, gone = _problems(
        "listeners_unchanged",
        probe,
        "service nginx stop",
        ["service nginx start"],
        "printf '[mysqld]\\nbind-address = 0.0.0.0\\n' > /etc/mysql/mariadb.conf.d/99-zz.cnf && "
        "service mariadb restart >/dev/null && chmod 666 /run/php/php8.2-fpm.sock && "
        "(setsid nc -lk -p 4444 </dev/null >/dev/null 2>&1 &) && "
        "(setsid nc -lku -p 45454 </dev/null >/dev/null 2>&1 &) && " + until_listening(4444, 45454),
    )
    assert new.startswith("new: ") and gone.startswith("gone: ")
    assert "tcp 0.0.0.0:3306" in new and "tcp 0.0.0.0:4444" in new
    assert "udp 0.0.0.0:45454" in new  # read twice (an ephemeral port), and still there
    assert "unix /run/php/php8.2-fpm.sock 33:33 666" in new
    assert "tcp 127.0.0.1:3306" in gone and "unix /run/php/php8.2-fpm.sock 33:33 660" in gone


def test_a_udp_socket_caught_connecting_is_no_listener_one_that_stays_is() -> None:
    """A UDP socket is bound to an ephemeral port of any address a moment before its
    ``connect`` completes (a name lookup): read again, it is gone (connected); a listener
    is still there. Other listeners are read once."""
    first = "tcp 0.0.0.0:80\nudp 0.0.0.0:36246\nudp 0.0.0.0:40000\nudp [::]:41000\n"
    again = "tcp 0.0.0.0:80\nudp 0.0.0.0:40000\nudp 0.0.0.0:50505\n"
    probe = Probe(None, _Canned([first + LISTED, again + LISTED]), None, root="/proc/1/root")  # type: ignore[arg-type]
    assert listeners(probe) == ["tcp 0.0.0.0:80", "udp 0.0.0.0:40000"]
    quiet = _Canned(["tcp 0.0.0.0:80\nudp 0.0.0.0:68\nudp 127.0.0.11:41234\n" + LISTED])
    assert listeners(Probe(None, quiet, None, root="/proc/1/root")) == [  # type: ignore[arg-type]
        "tcp 0.0.0.0:80",
        "udp 0.0.0.0:68",
        "udp 127.0.0.11:41234",
    ]
    assert quiet.outputs == []


CAUGHT = 5
READ_SECONDS = 20.0


@pytest.mark.live
def test_name_lookups_beside_the_reading_add_no_listener(probe: Probe) -> None:
    """A loop of UDP connects in the host (each a name lookup's first step): single
    readings catch some sockets half-way through ``connect``, the gate's reading never.

    A single reading catches one about once in a hundred (0 in 300 once failed CI), so the
    two are read in turns until singles have caught ``CAUGHT`` or ``READ_SECONDS`` passed."""
    loop = (
        "perl -MSocket -e 'for (1 .. 2e7) { socket(my $s, PF_INET, SOCK_DGRAM, 0); "
        'connect($s, pack_sockaddr_in(53, inet_aton("127.0.0.11"))); close $s }\''
    )
    started = probe.shell.run(f"setsid timeout 30 {loop} </dev/null >/dev/null 2>&1 & echo $!")
    assert started.ok and started.output.strip().isdigit(), started.output
    single, settled, rounds = 0, [], 0
    try:
        time.sleep(0.2)
        deadline = time.monotonic() + READ_SECONDS
        while (single < CAUGHT or rounds < 300) and time.monotonic() < deadline:
            rounds += 1
            single += any(_maybe_connecting(line) for line in _listeners_now(probe))
            settled += [line for line in listeners(probe) if _maybe_connecting(line)]
    finally:
        probe.shell.run(f"kill {started.output.strip()}")  # timeout passes it on to the loop
    assert single > 0, f"no reading of {rounds} caught a socket connecting: the race is not exercised"
    assert settled == [], f"{rounds} rounds, singles caught {single}"
