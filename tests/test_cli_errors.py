"""Bad command lines never crash: each is one line ``fixos: ...`` on stderr with exit 2, never a
traceback; seed ranges are checked and capped. And every command sweeps dead runs' leftovers:
after a SIGKILLed bench, `fixos list` leaves none of its containers or networks."""

from __future__ import annotations

import importlib.metadata
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from helpers import ROOT, containers_owned_by, labelled, start_fixos, wait_for

from fixos.cli.common import UsageError, parse_seeds
from fixos.cli.main import main
from fixos.stack.hosts import LABEL_RUN

BAD_LINES = [
    (["bench", "--seeds", "5-1"], "seed range 5-1 is reversed (write 1-5)"),
    (["bench", "--seeds", ""], "seeds must look like 3, 1-5 or 1,4,9"),
    (["bench", "--seeds", "1-"], "seeds must look like"),
    (["bench", "--seeds", "1-100000000"], "100000000 seed(s) make"),
    (["bench", "--scenarios", "easy_1", "--seeds", "1-3", "--max-episodes", "2"], "over the cap of 2"),
    (["bench", "--scenarios", "easy_1", "--agent", "a", "--agent", "b", "--seeds", "1-501"], "1002 episodes"),
    (["validate", "easy_1", "--seeds", "1-1000000"], "over the cap of 1000"),
    (["export", "out", "--seeds", "1-2000"], "tasks, over the cap"),
    (["--scenario-dir", "/nonexistent", "list"], "/nonexistent: --scenario-dir: does not exist"),
    (["bench", "--jobs", "0"], "must be a whole number >= 1"),
    (["serve", "--port", "99999"], "must be a TCP port"),
    (["bench", "--scenarios", "nope"], "no scenario 'nope'"),
    (["run"], "the following arguments are required: scenario"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    ([], "the following arguments are required: command"),
]


@pytest.mark.parametrize("argv, words", BAD_LINES, ids=[" ".join(a) or "nothing" for a, _ in BAD_LINES])
def test_a_bad_command_line_is_one_line_and_exit_2(argv, words, capsys):
    started = time.monotonic()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fixos: ") and err.count("\n") == 1, err
    assert words in err, err
    assert time.monotonic() - started < 5, "refused before any work"


def test_seeds_are_counted_not_listed():
    assert list(parse_seeds("3")) == [3]
    assert list(parse_seeds("1-3,2,9")) == [1, 2, 3, 9]
    huge = parse_seeds("1-100000000")
    assert len(huge) == 100_000_000  # a range, never a list of 10**8 ints
    with pytest.raises(UsageError, match="over the cap of 1000"):
        huge.within(1, 1000)
    assert parse_seeds("1-4").within(3, 12) == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "env, argv, named",
    [
        ({"DOCKER_HOST": "tcp://127.0.0.1:1"}, ["setup"], "DOCKER_HOST=tcp://127.0.0.1:1"),
        (
            {},
            ["setup", "--docker-host", "unix:///nonexistent.sock"],
            "--docker-host unix:///nonexistent.sock",
        ),
        ({}, ["clean", "--docker-host", "tcp://127.0.0.1:1"], "--docker-host tcp://127.0.0.1:1"),
    ],
)
def test_engine_errors_name_the_engine_tried(env, argv, named):
    """As a real process: one line on stderr, exit 2, no traceback."""
    done = subprocess.run(
        [sys.executable, "-m", "fixos.cli", *argv],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"fixos: no Docker engine answers at {named} "), done.stderr


def test_a_scenario_file_error_is_one_line_from_a_real_process(tmp_path: Path):
    (tmp_path / "bad.yaml").write_bytes(b"id: bad\ntitle: caf\xe9\n")
    done = subprocess.run(
        [sys.executable, "-m", "fixos.cli", "--scenario-dir", str(tmp_path), "list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == f"fixos: {tmp_path / 'bad.yaml'}: line 2: not UTF-8 text (byte 0xe9)\n"


ENTRY = """
import atexit, sys, threading, time
from fixos.cli.main import entry
where, other = sys.argv[1:]
left_open = open(where + "/left-open", "w")  # never closed: a buffer the exit must flush
left_open.write("written")
atexit.register(lambda: print("atexit ran", file=sys.stderr))
if other == "thread":  # a thread still at work: the usual exit waits for it
    threading.Thread(target=lambda: (time.sleep(0.5), open(where + "/late", "w").close())).start()
sys.argv = ["fixos", "list"]
entry()
"""


@pytest.mark.parametrize("other", ["none", "thread"])
def test_the_program_leaves_without_teardown_and_loses_nothing(tmp_path: Path, other: str):
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, str(tmp_path), other],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == "atexit ran\n"
    assert "easy_1" in done.stdout and done.stdout.rstrip().endswith("┘")  # the table, whole, through a pipe
    assert (tmp_path / "left-open").read_text() == "written"
    assert (tmp_path / "late").exists() == (other == "thread")


def test_version_is_the_installed_distributions():
    done = subprocess.run(
        [sys.executable, "-m", "fixos.cli", "--version"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"fixos {importlib.metadata.version('fixos')}\n"
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"] in done.stdout


@pytest.mark.live
def test_list_sweeps_a_sigkilled_bench(client, images, tmp_path):
    args = ["--scenarios", "easy_1", "--seeds", "1-4", "--agent", "nop", "-j", "2"]
    proc = start_fixos("bench", *args, "--results", str(tmp_path), quiet=True)
    try:
        wait_for(lambda: len(containers_owned_by(client, proc.pid)) >= 2, timeout=120)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    (run_id,) = {c.labels[LABEL_RUN] for c in containers_owned_by(client, proc.pid)}
    label = {"label": f"{LABEL_RUN}={run_id}"}
    assert client.networks.list(filters=label), "a bench's hosts have a network of their own"
    listed = subprocess.run(
        [sys.executable, "-m", "fixos.cli", "list"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0, listed.stderr
    assert "removed leftovers of dead run(s): " in listed.stdout and run_id in listed.stdout
    assert client.containers.list(all=True, filters=label, ignore_removed=True) == []
    assert client.networks.list(filters=label) == []
    assert labelled(client, run_id) == []
