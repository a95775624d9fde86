"""``fixos bench --ray`` on a two-node Ray cluster on this machine, each node with its own
Docker engine: the head uses this machine's engine, the second node runs inside the network
namespace of a second dockerd (scripts/netns-engine), so its tasks reach their hosts on that
namespace's loopback. Episodes run on both nodes, score as at home, land in the driver's run
directory, and leave nothing on either engine; a node that cannot have an image, or that dies
mid-run, ends the run with one line naming the node."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import labelled, wait_for

from fixos.bench.local import Plan
from fixos.bench.on_ray import RayBench
from fixos.bench.ray_cluster import QUIET, LocalCluster, free_port
from fixos.core.errors import FixOSError
from fixos.records.rundir import RunDir
from fixos.scenarios.catalog import load_catalog
from fixos.stack.engine import connect
from fixos.stack.images import ensure_base
from fixos.stack.leftovers import remove_labelled

pytestmark = pytest.mark.live

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "netns-engine"
NAME, INDEX = "fxray", 201  # the script's NAME and INDEX (10.214.201.0/30); nothing else uses them
HEAD_IP = f"10.214.{INDEX}.1"  # this side of the veth: the one address both namespaces reach


@pytest.fixture(scope="module")
def cluster(client, images):
    """Head (this engine, 2 slots) + a node in the netns (its engine, 2 slots), that engine
    holding this tree's images; every process, the netns and the temp dirs gone afterwards."""
    pytest.importorskip("ray")
    subprocess.run([SCRIPT, "down", NAME], check=True, capture_output=True)  # a killed run's leftover
    local = None
    try:
        out = subprocess.run([SCRIPT, "up", NAME, str(INDEX)], check=True, capture_output=True, text=True)
        where = dict(line.split("=", 1) for line in out.stdout.split())
        # the base too: a node derives the image tags from its base's id, as this engine does
        _copy([ensure_base(client, lambda line: None), *images.values()], where["socket"])
        local = LocalCluster(HEAD_IP, free_port(HEAD_IP))  # the address exists once the veth does
        local.start_head(slots=2)
        local.add_node(f"fixos-{NAME}", where["address"], where["socket"], slots=2)
        local.wait_for(2)
        yield local, where["socket"]
    finally:
        if local is not None:
            local.stop()
        subprocess.run([SCRIPT, "down", NAME], check=True, capture_output=True)


def test_bench_over_two_nodes_runs_on_both_engines_and_scores_as_at_home(cluster, client, tmp_path):
    local, socket = cluster
    results = tmp_path / "results"
    command = [sys.executable, "-m", "fixos.cli", "bench", "--scenarios", "easy_1", "--seeds", "1-2"]
    command += ["--agent", "oracle", "--agent", "nop", "--results", str(results), "--ray", local.address]
    # 4 episodes on 2 + 2 slots: all at once, so both nodes take some
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=_env())
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run,) = results.iterdir()
    records = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    assert sorted((r["agent"], r["seed"], r["status"], r["reward"]) for r in records) == [
        ("nop", 1, "scored", 0.0),
        ("nop", 2, "scored", 0.0),
        ("oracle", 1, "scored", 1.0),
        ("oracle", 2, "scored", 1.0),
    ]
    engines = {r["engine"].split(" on ray node ")[0] for r in records}
    assert engines == {"local", socket}  # both nodes ran episodes, each on its own engine
    assert (run / "junit.xml").is_file() and (run / "report.md").is_file()
    for episode in ("easy_1-s1-oracle", "easy_1-s2-nop"):  # written by the driver from the task's data
        assert {"transcript.jsonl", "reward.json"} <= {p.name for p in (run / episode).iterdir()}
    remote = connect(socket)
    try:
        assert labelled(client, run.name) == [] and labelled(remote, run.name) == []
    finally:
        remove_labelled(client, run_id=run.name)
        remove_labelled(remote, run_id=run.name)
        remote.close()


def test_a_node_that_cannot_have_an_image_ends_the_run_in_one_line_naming_it(cluster, tmp_path, monkeypatch):
    local, _ = cluster
    for key, value in QUIET.items():
        monkeypatch.setenv(key, value)
    easy = load_catalog()["easy_1"]
    ghost = easy.model_copy(update={"hosts": [h.model_copy(update={"image": "ghost"}) for h in easy.hosts]})
    plan = Plan(scenarios=["easy_1"], seeds=[1], agents=["nop"])
    # before any episode: the prepare task of each node fails, the first one read ends the run
    bench = RayBench(plan, RunDir(tmp_path, "test-ray-ghost"), {"easy_1": ghost}, address=local.address)
    with pytest.raises(FixOSError) as failed:
        bench.connect()
    message = str(failed.value)
    assert "\n" not in message and "ghost" in message and "on ray node 10.214." in message, message
    assert "RayTaskError" not in message and "Traceback" not in message
    # an episode task that fails (the image vanished after the nodes were prepared) does the same
    bench = RayBench(plan, RunDir(tmp_path, "test-ray-ghost-2"), {"easy_1": easy}, address=local.address)
    bench.connect()
    bench.catalog = {"easy_1": ghost}
    with pytest.raises(FixOSError) as failed:
        bench.execute()
    message = str(failed.value)
    assert message.startswith("episode easy_1-s1-nop failed on "), message
    assert "\n" not in message and "ghost" in message and "on ray node 10.214." in message, message
    assert bench.records() == []


def test_a_node_missing_an_image_ends_the_run_at_once_naming_it(cluster, images, tmp_path, monkeypatch):
    local, socket = cluster
    for key, value in QUIET.items():
        monkeypatch.setenv(key, value)
    remote = connect(socket)
    remote.images.remove(images["inspector"])  # a stale node: this tree's inspector is not there
    try:
        bench = RayBench(
            Plan(scenarios=["easy_1"], seeds=[1], agents=["nop"]),
            RunDir(tmp_path, "test-ray-missing"),
            load_catalog(),
            address=local.address,
        )
        started = time.monotonic()
        with pytest.raises(FixOSError) as failed:
            bench.connect()
        assert time.monotonic() - started < 60  # not a build stalling without a network
        message = str(failed.value)
        assert "\n" not in message and f"on ray node {HEAD_IP[:-1]}2" in message, message
        assert f"image {images['inspector']} missing" in message, message
    finally:
        _copy([images["inspector"]], socket)  # back, for the next test
        remote.close()


def test_ctrl_c_cancels_the_episodes_on_both_nodes_and_leaves_nothing(cluster, client, tmp_path):
    local, socket = cluster
    results = tmp_path / "results"
    command = [sys.executable, "-m", "fixos.cli", "bench", "--scenarios", "easy_1", "--seeds", "1-4"]
    command += ["--agent", "oracle", "--results", str(results), "--ray", local.address]
    bench = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    remote = connect(socket)
    try:
        wait_for(lambda: results.is_dir() and any(results.iterdir()), timeout=60)
        (run,) = results.iterdir()
        # Ctrl-C once an episode is under way on each engine
        wait_for(lambda: labelled(client, run.name) != [] and labelled(remote, run.name) != [], timeout=120)
        bench.send_signal(signal.SIGINT)
        out, err = bench.communicate(timeout=300)
        assert bench.returncode == 130, out[-1000:] + err[-1000:]
        assert "interrupted; containers of this run removed" in err
        assert labelled(client, run.name) == [] and labelled(remote, run.name) == []
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        for run in results.iterdir() if results.is_dir() else []:
            remove_labelled(client, run_id=run.name)
            remove_labelled(remote, run_id=run.name)
        remote.close()


def test_a_node_that_dies_mid_run_ends_it_in_one_line_and_the_other_engine_is_swept(
    cluster, client, tmp_path, monkeypatch
):
    """Last in the module: it stops the second node."""
    local, socket = cluster
    for key, value in QUIET.items():
        monkeypatch.setenv(key, value)
    plan = Plan(scenarios=["easy_1"], seeds=[1, 2, 3], agents=["oracle"])  # 3 on 2 + 2 slots: both nodes
    run = RunDir(tmp_path, "test-ray-node-dies")
    bench = RayBench(plan, run, load_catalog(), address=local.address)
    remote = connect(socket)

    def kill_the_node_once_its_episode_started() -> None:
        wait_for(lambda: labelled(remote, run.run_id) != [], timeout=120)
        local.nodes[1].stop()

    killer = threading.Thread(target=kill_the_node_once_its_episode_started)
    killer.start()
    try:
        with pytest.raises(FixOSError) as failed:
            bench.execute()
        message = str(failed.value)
        # whichever comes first names the node: Ray's NodeDiedError, or the task's own error when
        # its worker, stopped with the node, still returned (its teardown cut short)
        assert "\n" not in message and message.startswith("episode easy_1-s"), message
        assert "10.214.201.2" in message and "Traceback" not in message, message
        assert labelled(client, run.run_id) == []  # the head's episodes were cancelled and swept
    finally:
        killer.join()
        remove_labelled(client, run_id=run.run_id)
        remote.close()


def _copy(tags: list[str], socket: str) -> None:
    save = subprocess.Popen(["docker", "save", *tags], stdout=subprocess.PIPE)
    load = subprocess.run(
        ["docker", "-H", socket, "load", "-q"], stdin=save.stdout, capture_output=True, text=True
    )
    assert save.wait() == 0 and load.returncode == 0, load.stderr


def _env() -> dict[str, str]:
    import os

    env = {**os.environ, **QUIET}
    env.pop("DOCKER_HOST", None)
    return env
