"""The episode's SSH endpoint: its own key, and a plain OpenSSH client gets in."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from fixos.core.errors import ShellError
from fixos.shells.ssh import EpisodeKey, SshShell
from fixos.stack.tunnel import Bridge, Direct, bridge_is_here

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
        address, port = live_host.endpoint(22)
        SshShell(port, EpisodeKey(), host=address)


def test_no_password_login(live_host):
    out = live_host.shell().run("sshd -T | grep -E '^(passwordauthentication|permitrootlogin)'").output
    assert "passwordauthentication no" in out
    assert "permitrootlogin without-password" in out or "permitrootlogin prohibit-password" in out


def test_a_local_engines_hosts_publish_nothing_and_are_reached_on_the_bridge(live_host, client):
    """The bridge is this machine's: the engine starts no proxy and writes no NAT rule for
    the host, and this machine reaches its ports at the address the engine gave it."""
    attrs = client.api.inspect_container(live_host.handle.container_id)
    assert not any(attrs["NetworkSettings"]["Ports"].get(f"{p}/tcp") for p in (22, 80, 443))
    assert not attrs["HostConfig"]["PortBindings"]
    networks = attrs["NetworkSettings"]["Networks"]
    assert live_host.handle.address in {n["IPAddress"] for n in networks.values()}
    assert live_host.endpoint(80) == (live_host.handle.address, 80)
    assert live_host.http_get(80, "/").status == 200


def test_an_engine_whose_bridge_is_elsewhere_gets_published_ports():
    """A gateway that is no address here (a VM's bridge, another namespace's): publish."""

    class Network:
        def __init__(self, gateway: str) -> None:
            self.attrs = {"IPAM": {"Config": [{"Subnet": "x", "Gateway": gateway}]}}

    assert not bridge_is_here(Network("192.0.2.1"))  # TEST-NET-1: never an address here
    assert bridge_is_here(Network("127.0.0.1"))
    assert not bridge_is_here(type("N", (), {"attrs": {}})())
    assert Direct.publishes and not Bridge.publishes
