"""Every run ends when asked: Ctrl-C or SIGTERM ends a run within seconds whatever the
agent is doing (waiting for a human, for a model, between commands), with teardown and
the episode said to be interrupted; a harness failure's retry says what failed."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import labelled, start_fixos
from rich.console import Console

import fixos.bench.local as bench_module
from fixos.agents.base import Endpoints, Task
from fixos.agents.external import ExternalAgent
from fixos.agents.llm import LlmAgent
from fixos.bench.local import Bench, Plan
from fixos.records.failures import EpisodeStatus, Failure, FailureKind
from fixos.records.models import EpisodeRecord, Timings
from fixos.records.rundir import RunDir, read_interrupted
from fixos.scenarios.catalog import load_catalog
from fixos.shells.fake import FakeShell
from fixos.shells.recording import RecordingShell
from fixos.shells.stopping import stop_requested, watch
from fixos.views.terminal import PlainView, transcript_view

STOP_WITHIN = 3.0
"""seconds an agent's wait may outlive the stop."""


def _in_worker(work, stop: threading.Event) -> tuple[list[BaseException], threading.Thread]:
    """Run ``work`` in a thread that watches ``stop``, as a bench worker does."""
    raised: list[BaseException] = []

    def body() -> None:
        watch(stop)
        try:
            work()
        except BaseException as exc:  # what the bench's future would hold
            raised.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return raised, thread


def _stopped_in_time(work) -> list[BaseException]:
    stop = threading.Event()
    raised, thread = _in_worker(work, stop)
    time.sleep(0.5)
    assert thread.is_alive(), "the work waits until it is stopped"
    stop.set()
    thread.join(STOP_WITHIN)
    assert not thread.is_alive(), f"still waiting {STOP_WITHIN}s after the stop"
    return raised


def test_the_external_agent_stops_waiting(tmp_path: Path) -> None:
    workdir = tmp_path / "run" / "episode"
    workdir.mkdir(parents=True)
    endpoints = Endpoints(ssh="ssh root@127.0.0.1", docker_exec="docker exec -it x bash", key_path="k")
    task = Task("easy_1", "nginx is down", 10, 600.0, workdir, endpoints)
    raised = _stopped_in_time(lambda: ExternalAgent(poll=0.1).solve(task, FakeShell(lambda c: "")))
    assert [type(e) for e in raised] == [KeyboardInterrupt]


def test_no_command_runs_once_stopped() -> None:
    shell = FakeShell(lambda c: "")
    recording = RecordingShell(shell, max_steps=100, wall_seconds=600, command_timeout=30)

    def keep_running() -> None:
        while True:
            recording.run("uptime")
            time.sleep(0.05)

    raised = _stopped_in_time(keep_running)
    assert [type(e) for e in raised] == [KeyboardInterrupt]
    ran = len(shell.commands)
    time.sleep(0.2)
    assert len(shell.commands) == ran


def test_the_llm_agent_stops_waiting_for_its_model(monkeypatch: pytest.MonkeyPatch) -> None:
    answered = threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            answered.wait(30)  # a model that takes its time

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("API_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
    monkeypatch.setenv("MODEL_NAME", "slow")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    try:
        agent = LlmAgent(timeout=60)
        raised = _stopped_in_time(lambda: agent.solve(Task("easy_1", "x", 5, 600.0), FakeShell(lambda c: "")))
        assert [type(e) for e in raised] == [KeyboardInterrupt]
    finally:
        answered.set()
        server.shutdown()
        server.server_close()


def test_a_thread_nobody_stops_is_never_stopped() -> None:
    assert not stop_requested()


# -- live: the whole process -------------------------------------------------------------------


def _read_until(proc, marker: str, timeout: float) -> list[str]:
    """Lines of the child's output up to the one holding ``marker`` (reads in a thread)."""
    lines: list[str] = []
    seen = threading.Event()

    def pump() -> None:
        for line in proc.stdout:
            lines.append(line)
            if marker in line:
                seen.set()
        seen.set()

    threading.Thread(target=pump, daemon=True).start()
    assert seen.wait(timeout), "".join(lines)
    return lines


def _stop(proc, signum: int, *, after: float, wait: float) -> float:
    """Seconds ``proc`` takes to exit once sent ``signum``, ``after`` seconds from now; a
    process still there after ``wait`` more seconds fails the test."""
    time.sleep(after)
    sent = time.monotonic()
    proc.send_signal(signum)
    proc.wait(timeout=wait)
    return time.monotonic() - sent


@contextmanager
def _reaped(proc) -> Iterator[None]:
    """Kill and reap ``proc`` when the block ends with it still running: a failed test
    leaves no child behind."""
    try:
        yield
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.live
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_a_run_waiting_for_an_external_agent(client, images, tmp_path, signum) -> None:
    proc = start_fixos("run", "easy_1", "--agent", "external", "--results", str(tmp_path))
    with _reaped(proc):
        lines = _read_until(proc, "When the host is repaired", timeout=120)
        run_id = next(p.name for p in tmp_path.iterdir() if p.is_dir())
        assert labelled(client, run_id), "the host is up while the agent waits"
        took = _stop(proc, signum, after=1.0, wait=30)
    time.sleep(0.2)  # the pump thread drains the last lines
    output = "".join(lines)
    assert proc.returncode == 130, output
    assert took < 10, f"{took:.1f}s to stop"
    assert "interrupted" in output
    assert labelled(client, run_id) == []
    # recorded on disk as interrupted, and not in the journal, so --resume runs it again
    run = RunDir(tmp_path, run_id)
    assert run.records() == []
    [episode_dir] = [p for p in run.path.iterdir() if p.is_dir()]
    stopped = read_interrupted(episode_dir)
    assert stopped is not None, sorted(p.name for p in episode_dir.iterdir())
    assert stopped.status is EpisodeStatus.interrupted
    assert stopped.failure is not None and stopped.failure.kind is FailureKind.interrupted
    assert stopped.faults, "what the episode got to: its faults were in"
    shown = Console(record=True, width=200)
    for part in transcript_view(episode_dir):
        shown.print(part)
    assert "interrupted, not scored" in shown.export_text()


@pytest.mark.live
def test_ctrl_c_ends_a_parallel_validation_and_leaves_nothing(client, images, tmp_path) -> None:
    """`fixos validate -j 2` runs its episodes as a bench does: Ctrl-C mid-episode ends it,
    exit 130, every container of the run removed."""
    proc = start_fixos("validate", "easy_1", "--seeds", "1", "-j", "2", "--results", str(tmp_path))
    with _reaped(proc):
        lines = _read_until(proc, "at a time; results in", timeout=180)
        run_id = next(p.name for p in tmp_path.iterdir() if p.is_dir())
        deadline = time.monotonic() + 120
        while not labelled(client, run_id) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert labelled(client, run_id), "the episodes' hosts are up"
        # 2 s on: into the episodes, resets, agents at work
        took = _stop(proc, signal.SIGINT, after=2.0, wait=60)
    time.sleep(0.2)
    assert proc.returncode == 130, "".join(lines)
    # A take waiting for a spare stops at once (stack.pool); a reset's check already
    # running in the hosts ends with its command (timeouts of 10-20 s; NOTES)
    assert took < 45, f"{took:.1f}s to stop"
    assert labelled(client, run_id) == []


def test_a_retry_says_what_failed_and_that_the_host_is_fresh(tmp_path: Path, monkeypatch) -> None:
    outcomes = [Failure(kind=FailureKind.boot_failed, detail="host web did not answer in 60s"), None]

    def fake_episode(scenario, seed, agent, **kwargs):
        record = EpisodeRecord(
            run_id="r",
            episode_id=f"{scenario.id}-s{seed}-{agent}",
            scenario=scenario.id,
            difficulty=scenario.difficulty,
            seed=seed,
            agent=agent,
            status=EpisodeStatus.scored,
            reward=0.0,
            solved=False,
            steps=0,
            timings=Timings(),
        )
        failure = outcomes.pop(0)
        if failure is not None:
            record.fail(failure)
        return record, []

    monkeypatch.setattr(bench_module, "run_episode", fake_episode)
    monkeypatch.setattr(bench_module, "remove_labelled", lambda client, run_id: None)
    run = RunDir(tmp_path, "r")
    plan = Plan(scenarios=["easy_1"], seeds=[1], agents=["external"])
    engine = SimpleNamespace(client=None, images={}, url="unix://fake")
    console = Console(record=True, width=300)
    bench = Bench(plan, run, load_catalog(), engines=[engine], parallel=1, warm=False)
    bench.events = PlainView(console, 1)
    bench.execute()
    said = console.export_text()
    assert "the harness failed (boot_failed: host web did not answer in 60s)" in said
    assert "fresh host" in said
    assert outcomes == [], "it ran again"
