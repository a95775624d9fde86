"""A remote engine, end to end: a second dockerd in a network namespace of its own
(scripts/netns-engine), reached from here only over ``ssh://`` (and ``tcp://`` with
TLS). Its published ports sit on its namespace's 127.0.0.1, out of this machine's
reach, so every shell, file, HTTP and TLS probe must go through the engine
connection (``fixos.stack.tunnel``): a bench of three episodes side by side scores 1.0
with the oracle over SSH (no harness failure, no retry), nop over exec scores 0.0, and
nothing of the run is left on that engine."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from helpers import Watch, labelled, wait_for

from fixos.bench.local import Bench, Plan
from fixos.core.errors import EngineError
from fixos.episodes.episode import run_episode
from fixos.records.rundir import RunDir
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.schema import HostSpec
from fixos.stack.engine import Engine, connect
from fixos.stack.hosts import Stack
from fixos.stack.leftovers import remove_labelled
from fixos.stack.tls import served_certificate
from fixos.stack.tunnel import RELAY_ROLE, engine_is_local

pytestmark = pytest.mark.live

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "netns-engine"
NAME, INDEX = "fxremote", 200  # the script's NAME and INDEX (10.214.200.0/30); nothing else uses them


@pytest.fixture(scope="module")
def remote(images):
    """The netns engine, up with TLS, holding this tree's images; torn down however the module ends."""
    subprocess.run([SCRIPT, "down", NAME], check=True, capture_output=True)  # a leftover of a killed run
    try:
        up = [SCRIPT, "up", NAME, str(INDEX), "--tls"]
        out = subprocess.run(up, check=True, capture_output=True, text=True)
        where = dict(line.split("=", 1) for line in out.stdout.split())
        # images through ssh(1) into the remote docker: one stream, shared layers sent once
        config = Path(where["home"]) / ".ssh" / "config"
        save = subprocess.Popen(["docker", "save", *images.values()], stdout=subprocess.PIPE)
        load = subprocess.run(
            ["ssh", "-F", str(config), where["address"], "docker", "load", "-q"],
            stdin=save.stdout,
            capture_output=True,
            text=True,
        )
        assert save.wait() == 0 and load.returncode == 0, load.stderr
        with pytest.MonkeyPatch.context() as env:
            env.setenv("HOME", where["home"])  # docker-py's paramiko reads ~/.ssh/{config,known_hosts}
            yield where
    finally:
        subprocess.run([SCRIPT, "down", NAME], check=True, capture_output=True)


@pytest.fixture(scope="module")
def over_ssh(remote):
    client = connect(remote["ssh_url"])
    yield client
    client.close()


def test_parallel_bench_over_ssh_engine_scores_as_at_home(over_ssh, images, remote, tmp_path):
    assert not engine_is_local(over_ssh)
    assert over_ssh.info()["DockerRootDir"] == f"/var/lib/fixos-netns-engine-{NAME}"  # really the other one
    # three episodes at once, the agents over SSH: every probe, SSH session and verdict of the three
    # goes through their relays over one ssh:// client (with an exec per connection, probes timed
    # out and healthy checks failed here: NOTES.md)
    run = RunDir(tmp_path, "test-remote-bench")
    plan = Plan(scenarios=["easy_1"], seeds=[1, 2, 3], agents=["oracle"], transport="ssh")
    watch = Watch()
    engines = [Engine(remote["ssh_url"], over_ssh, images)]
    try:
        Bench(plan, run, load_catalog(), engines=engines, parallel=3, events=watch).execute()
        records = run.records()
        assert watch.retried == [] and watch.peak == 3
        assert sorted(r.episode_id for r in records) == sorted(j.episode_id for j in plan.jobs())
        for record in records:
            assert record.status == "scored" and record.reward == 1.0, (record.episode_id, record.error)
        assert labelled(over_ssh, run.run_id) == []  # hosts, spares, relays and networks all gone
    finally:
        remove_labelled(over_ssh, run_id=run.run_id)


def test_nop_over_exec_on_ssh_engine_scores_zero(over_ssh, images):
    run_id = "test-remote-nop-exec"
    try:
        easy_1 = load_catalog()["easy_1"]
        record = run_episode(easy_1, 1, "nop", client=over_ssh, images=images, run_id=run_id)[0]
        assert record.status == "scored" and record.reward == 0.0, record
        assert labelled(over_ssh, run_id) == []
    finally:
        remove_labelled(over_ssh, run_id=run_id)


def test_tls_engine_reaches_shells_files_and_probes_through_the_relay(remote, images, monkeypatch):
    with pytest.raises(EngineError):  # the daemon insists on a client certificate
        connect(remote["tls_url"], timeout=10)
    monkeypatch.setenv("DOCKER_CERT_PATH", remote["cert_path"])
    monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
    # requests would let these replace the engine's CA for every request: connect() must not
    other_ca = Path(remote["home"]) / "other-ca.pem"
    newca = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=other -keyout /dev/null -out"
    subprocess.run([*newca.split(), str(other_ca)], check=True, capture_output=True)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(other_ca))
    monkeypatch.setenv("CURL_CA_BUNDLE", str(other_ca))
    client = connect(remote["tls_url"])
    assert not engine_is_local(client)
    run_id = "test-remote-tls"
    stack = Stack(client, run_id=run_id, episode_id=run_id, hosts=[HostSpec(name="web")], images=images)
    try:
        stack.up()  # its TLS install already waited for 443 through the relay
        web = stack.hosts["web"]
        labels = [f"fixos.run={run_id}", f"fixos.role={RELAY_ROLE}"]
        relays = client.containers.list(filters={"label": labels})
        assert len(relays) == 1
        address = web.endpoint(80)
        assert address != ("127.0.0.1", web.handle.ports[80])  # a listener of ours, not the published port
        page = web.http_get(80, "/")
        assert page.status == 200 and b"Tidewater" in page.body
        assert web.http_get(80, "/no-such-page").status == 404
        assert served_certificate(web.endpoint(443)) is not None
        assert web.tls is not None and web.tls.address == web.endpoint(443)
        # the relay's one exec dies (as when the engine connection breaks): the next connection
        # starts another, and the episode's probes go on
        relay = relays[0]
        assert relay.exec_run(["pkill", "-x", "perl"]).exit_code == 0
        wait_for(lambda: web.http_get(80, "/").status == 200, timeout=20)
        assert relay.exec_run(["pgrep", "-c", "-x", "perl"]).output.strip() == b"1"
        with web.ssh_shell(default_timeout=20) as shell:
            assert shell.run("hostname").output.strip() == "web"
        with web.shell(default_timeout=20) as shell:
            assert shell.run("service nginx stop").ok
        assert web.http_get(80, "/").status == 0  # the relay reports a dead port as a dead port
        assert web.read_file("/etc/hostname") == b"web\n"
    finally:
        stack.down()
    assert labelled(client, run_id) == []
    with pytest.raises(OSError):  # the listener went with the stack
        socket.create_connection(address, timeout=2).close()
    client.close()
