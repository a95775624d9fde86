"""One bench over two Docker engines: a second dockerd on its own socket and data root."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from helpers import labelled

from fixos.cli.main import main
from fixos.stack.engine import shares


def test_shares_split_the_jobs_over_engines():
    assert shares(5, 2) == [3, 2]
    assert shares(4, 4) == [1, 1, 1, 1]
    assert shares(1, 2) == [1, 0]


HAD_DOCKER0 = {"docker0"} & set(os.listdir("/sys/class/net"))


@pytest.fixture(scope="module")
def second_engine() -> Iterator[str]:
    """A dockerd of its own: socket, data root, exec root, address pool and default
    bridge (`--bridge=none` would make it delete the first engine's docker0), and
    no iptables rules (the machine's first engine owns those)."""
    if os.geteuid() != 0 or shutil.which("dockerd") is None or shutil.which("ip") is None:
        pytest.skip("a second engine needs root, dockerd and ip")
    root = Path(tempfile.mkdtemp(prefix="fixos-engine2-"))
    bridge = f"fixos-e{os.getpid() % 100000}"
    for command in (
        ["ip", "link", "add", bridge, "type", "bridge"],
        ["ip", "addr", "add", "10.214.0.1/24", "dev", bridge],
        ["ip", "link", "set", bridge, "up"],
    ):
        subprocess.run(command, check=True)
    url = f"unix://{root}/docker.sock"
    log = (root / "dockerd.log").open("w")
    daemon = subprocess.Popen(
        [
            "dockerd",
            f"--host={url}",
            f"--data-root={root}/data",
            f"--exec-root={root}/exec",
            f"--pidfile={root}/docker.pid",
            f"--bridge={bridge}",
            "--iptables=false",
            "--ip6tables=false",
            "--default-address-pool=base=10.213.0.0/16,size=24",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(150):
            try:
                docker.DockerClient(base_url=url, timeout=10).ping()
                break
            except Exception:
                if daemon.poll() is not None:
                    pytest.fail(f"second dockerd exited: {(root / 'dockerd.log').read_text()[-500:]}")
                subprocess.run(["sleep", "0.2"])
        else:
            pytest.fail("second dockerd did not answer in 30 s")
        yield url
    finally:
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(timeout=60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        log.close()
        subprocess.run(["umount", "-R", str(root / "data")], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True)


@pytest.mark.live
def test_a_bench_spreads_over_two_engines_and_leaves_nothing_on_either(
    client, images, second_engine, tmp_path
):
    other = docker.DockerClient(base_url=second_engine, timeout=120)
    local = "unix:///var/run/docker.sock"
    args = ["bench", "--scenarios", "easy_1", "--seeds", "1-4", "--agent", "oracle", "-j", "2"]
    args += ["--docker-host", local, "--docker-host", second_engine, "--results", str(tmp_path)]
    assert main(args) == 0
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    records = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    assert sorted(r["reward"] for r in records) == [1.0] * 4
    assert {r["engine"] for r in records} == {local, second_engine}
    # the image was copied, not rebuilt: same tag, same id on both engines
    assert other.images.get(images["server"]).id == client.images.get(images["server"]).id
    assert labelled(client, run_dir.name) == []
    assert labelled(other, run_dir.name) == []
    # the first engine's own networking is untouched
    assert set(os.listdir("/sys/class/net")) >= HAD_DOCKER0
