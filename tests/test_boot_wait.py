"""The boot's wait wakes MariaDB's init script from its whole-second sleep once the server's
socket is there, and touches no other sleep (``fixos.stack.boot_wait``)."""

from __future__ import annotations

import time

import pytest

from fixos.stack.boot_wait import boot_wait

pytestmark = pytest.mark.live

# Stands in for Debian's script: its start sleeps a whole second (here thirty) before it asks.
FAKE_INIT = "#!/bin/sh\nsleep 30\necho $? > /tmp/mariadb-slept\n"
OTHER = "#!/bin/sh\nsleep 30\necho $? > /tmp/other-slept\n"


def test_the_boot_wait_wakes_only_mariadbs_init_script(client, images):
    host = client.containers.run(
        images["server"], ["sleep", "infinity"], detach=True, labels={"fixos.test": "boot-wait"}
    )
    try:

        def sh(command: str) -> tuple[int, str]:
            code, out = host.exec_run(["bash", "-c", command])
            return code, out.decode()

        assert (
            sh(f"printf %b {FAKE_INIT!r} > /etc/init.d/mariadb && printf %b {OTHER!r} > /etc/init.d/other")[0]
            == 0
        )
        host.exec_run(["/bin/sh", "/etc/init.d/mariadb", "start"], detach=True)
        host.exec_run(["/bin/sh", "/etc/init.d/other", "start"], detach=True)
        # Not woken while the server's socket is missing: the wait ends at its bound, both asleep.
        assert sh(boot_wait("[ -e /nothing ]", 0.5, mariadb=True))[0] == 0
        assert sh("test -e /tmp/mariadb-slept || test -e /tmp/other-slept")[0] == 1
        # The socket appears (a listener where mariadbd's would be): MariaDB's script is woken.
        host.exec_run(
            ["bash", "-c", "mkdir -p /run/mysqld && exec nc -lU /run/mysqld/mysqld.sock"], detach=True
        )
        deadline = time.monotonic() + 10
        while sh("test -S /run/mysqld/mysqld.sock")[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sh(boot_wait("[ -e /tmp/mariadb-slept ]", 5, mariadb=True))[0] == 0
        assert sh("cat /tmp/mariadb-slept") == (0, "143\n")  # its sleep ended by SIGTERM
        assert sh("test -e /tmp/other-slept")[0] == 1  # the other script sleeps on
        # A host without MariaDB among its services: nothing is woken.
        host.exec_run(["/bin/sh", "/etc/init.d/mariadb", "start"], detach=True)
        time.sleep(0.2)
        assert (
            sh("rm /tmp/mariadb-slept && " + boot_wait("[ -e /tmp/mariadb-slept ]", 0.5, mariadb=False))[0]
            == 0
        )
        assert sh("test -e /tmp/mariadb-slept")[0] == 1
    finally:
        host.remove(force=True)
