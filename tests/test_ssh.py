"""The episode's SSH endpoint: its own key, and a plain OpenSSH client gets in."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from fixos.core.errors import ShellError
from fixos.shells.ssh import SshShell, new_key

pytestmark = pytest.mark.live


def test_openssh_client_logs_in_with_the_episode_key(live_host, tmp_path):
    if shutil.which("ssh") is None:
        pytest.fail("the OpenSSH client is missing: make test installs openssh-client")
    key = live_host.write_key(tmp_path / "id_episode")
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    command = [*live_host.ssh_command(key).split(), "-o", "BatchMode=yes", "hostname; id -u"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["web", "0"]


def test_another_key_is_refused(live_host):
    with pytest.raises(ShellError, match="cannot log in"):
        SshShell(live_host.handle.ports[22], new_key())


def test_no_password_login(live_host):
    out = live_host.shell().run("sshd -T | grep -E '^(passwordauthentication|permitrootlogin)'").output
    assert "passwordauthentication no" in out
    assert "permitrootlogin without-password" in out or "permitrootlogin prohibit-password" in out
