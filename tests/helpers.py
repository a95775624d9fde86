"""Helpers for tests against a real Docker engine."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import docker

from fixos.bench.local import Events
from fixos.core.models import CheckResult, Outcome, Verdict
from fixos.records.failures import EpisodeStatus, Failure, FailureKind
from fixos.records.models import EpisodeRecord, Timings
from fixos.scenarios.schema import HostSpec
from fixos.shells.base import Shell
from fixos.stack.hosts import LABEL_OWNER, LABEL_RUN, LiveHost, Stack
from fixos.stack.inspector import HOST_ROOT, Inspector
from fixos.stack.leftovers import remove_labelled
from fixos.verifier import CHECKS, Check, Probe, backend

T = TypeVar("T")


def shard(items: list[T], spec: str) -> list[T]:
    """``--shard K/N``: every N-th of ``items`` from the K-th (1-based), in order; ValueError
    on a spec that is not K/N with 1 <= K <= N."""
    k, n = (int(x) for x in spec.split("/"))
    if not 1 <= k <= n:
        raise ValueError(spec)
    return [item for i, item in enumerate(items) if i % n == k - 1]


def wait_for(condition: Callable[[], bool], *, timeout: float = 30.0, delay: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"Timeout: {condition}")
        time.sleep(0.2)


def until_listening(*ports: int, peers: Sequence[str] = (), paths: Sequence[str] = ()) -> str:
    """A host's shell command that waits (10 s at most) until ``ss`` lists a socket bound to each
    of ``ports`` (any protocol and state), one connected to each of ``peers`` (``addr:port``)
    and each of ``paths`` exists; it fails if they are not all there by then. Detached
    programs bind a moment after the command that started them returned (a fixed sleep
    before reading them is a race on a loaded machine)."""
    found = [f"ss -antuH 2>/dev/null | grep -qE ':{port}[[:space:]]'" for port in ports]
    found += [f"ss -antuH 2>/dev/null | grep -qE ' {peer}([[:space:]]|$)'" for peer in peers]
    found += [f"test -e {path}" for path in paths]
    every = " && ".join(found)
    return f"i=0; until {every}; do i=$((i + 1)); [ $i -ge 100 ] && break; sleep 0.1; done; {every}"


def labelled(client: docker.DockerClient, run_id: str) -> list[str]:
    """Names of every container, network and volume that carries the run's label."""
    label = {"label": f"{LABEL_RUN}={run_id}"}
    found = [c.name for c in client.containers.list(all=True, filters=label, ignore_removed=True)]
    found += [n.name for n in client.networks.list(filters=label)]
    found += [v.name for v in client.volumes.list(filters=label)]
    return found


ROOT = Path(__file__).resolve().parent.parent


def start_fixos(*args: str, quiet: bool = False) -> subprocess.Popen:
    """`fixos ARGS` as a child process (its output piped as text unless ``quiet``)."""
    out = subprocess.DEVNULL if quiet else subprocess.PIPE
    return subprocess.Popen(
        [sys.executable, "-m", "fixos.cli", *args],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=subprocess.STDOUT if not quiet else subprocess.DEVNULL,
        text=True,
    )


def containers_owned_by(client: docker.DockerClient, pid: int, run_id: str | None = None) -> list:
    """Containers whose owner label names this process."""
    label = f"{LABEL_RUN}={run_id}" if run_id else LABEL_OWNER
    return [
        c
        for c in client.containers.list(all=True, filters={"label": label}, ignore_removed=True)
        if c.labels.get(LABEL_OWNER, "").split(":")[1:2] == [str(pid)]
    ]


class Watch(Events):
    """How many episodes ran at once, and every harness failure the bench retried."""

    def __init__(self) -> None:
        self.now = self.peak = 0
        self.retried: list[str] = []
        self.lock = threading.Lock()

    def started(self, job):
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def finished(self, record, retried):
        with self.lock:
            self.now -= 1

    def retrying(self, job, failure):
        with self.lock:
            self.now -= 1
            self.retried.append(f"{job.episode_id}: {failure.text}")


@contextmanager
def booted(
    client: docker.DockerClient, images: dict[str, str], run_id: str, spec: HostSpec | None = None
) -> Iterator[LiveHost]:
    """One booted host (``spec``, by default a plain ``web``) as an episode gets it; its
    stack taken down on the way out, whether or not it came up."""
    spec = spec or HostSpec(name="web")
    stack = Stack(client, run_id=run_id, episode_id=run_id, hosts=[spec], images=images)
    try:
        stack.up()
        yield stack.hosts[spec.name]
    finally:
        stack.down()


@contextmanager
def booted_stack(
    client: docker.DockerClient, images: dict[str, str], run_id: str, hosts: Sequence[HostSpec]
) -> Iterator[Stack]:
    """``hosts`` booted on one network as an episode gets them; taken down on the way out,
    whether or not they came up, with whatever else is labelled ``run_id``."""
    stack = Stack(client, run_id=run_id, episode_id=run_id, hosts=list(hosts), images=images)
    try:
        stack.up()
        yield stack
    finally:
        stack.down()
        remove_labelled(client, run_id=run_id)


@contextmanager
def inspector_probe(client: docker.DockerClient, host: LiveHost, image: str) -> Iterator[Probe]:
    """What a check sees of ``host`` through an inspector, as an episode's verdicts are taken."""
    with Inspector(client, host, image) as inspector:
        view = inspector.shell
        yield Probe(backend.testinfra_host(view, host.name), view, host, root=HOST_ROOT)


@contextmanager
def judged_host(
    client: docker.DockerClient,
    images: dict[str, str],
    run_id: str,
    *,
    timeout: float,
    spec: HostSpec | None = None,
) -> Iterator[tuple[LiveHost, Shell, Probe]]:
    """A booted host, a session in it (commands time out at ``timeout``) that breaks and
    repairs it, and the probe the checks look through: an inspector's."""
    with (
        booted(client, images, run_id, spec) as host,
        host.shell(default_timeout=timeout) as shell,
        inspector_probe(client, host, images["inspector"]) as probe,
    ):
        yield host, shell, probe


def scenario_yaml(id: str, *, faults: str, solution: str, difficulty: str = "easy") -> str:
    """The text of a scenario file, ``{id}.yaml``, whose one host (web) must run nginx: its
    ``faults`` (the list's items) and ``solution`` are YAML as written under their keys, at
    any common indent."""
    header = textwrap.dedent(
        f"""\
        id: {id}
        title: a test scenario
        difficulty: {difficulty}
        instruction: The website is down, please fix it.
        hosts: [{{name: web}}]
        """
    )
    checks = textwrap.dedent(
        """\
        checks:
          - name: nginx is running
            type: service_running
            params: {service: nginx}
        """
    )
    faults = "faults:\n" + textwrap.indent(textwrap.dedent(faults), "  ")
    return header + faults + checks + "solution: " + textwrap.dedent(solution)


def gate_after(
    kind: str, probe: Probe, fault: str, params: dict[str, Any] | None = None
) -> tuple[Check, Any]:
    """The steady-state gate ``kind`` (default params, or ``params``), shown to pass on the
    healthy host, and its baseline refined after ``fault`` ran: what the faults disturbed is
    left out."""
    check = CHECKS.get(kind)(CHECKS.get(kind).Params(**(params or {})))
    baseline = check.snapshot(probe)
    healthy = check.evaluate(probe, check.refine(probe, baseline))
    assert healthy.passed, f"healthy host fails {kind}: {healthy.detail}"
    assert probe.shell.run(fault, timeout=60).ok, fault
    return check, check.refine(probe, baseline)


def gate_violated(
    kind: str,
    probe: Probe,
    fault: str,
    repairs: Sequence[str],
    violation: str,
    params: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """The steady-state gate ``kind`` passes after ``fault`` (what the faults disturbed is
    not the agent's) and after each command of ``repairs`` (which it must let through), then
    fails after a violation by the agent: the details of its verdicts after the fault and
    after the violation."""
    check, baseline = gate_after(kind, probe, fault, params)
    broken = check.evaluate(probe, baseline)
    assert broken.passed, f"after the fault: {broken.detail}"
    for repair in repairs:
        assert probe.shell.run(repair, timeout=60).ok, repair
        repaired = check.evaluate(probe, baseline)
        assert repaired.passed, f"after {repair}: {repaired.detail}"
    assert probe.shell.run(violation, timeout=60).ok, violation
    violated = check.evaluate(probe, baseline)
    assert not violated.passed, f"{violation} passed {kind}: {violated.detail}"
    return broken.detail, violated.detail


def until(check: Check, probe: Probe, baseline: Any, passed: bool, timeout: float = 15.0) -> Outcome:
    """The check's verdict once it says ``passed`` (the host takes a moment), or the last one."""
    deadline = time.monotonic() + timeout
    while True:
        outcome = check.evaluate(probe, baseline)
        if outcome.passed == passed or time.monotonic() > deadline:
            return outcome
        time.sleep(0.2)


@contextmanager
def removed_run(client: docker.DockerClient, run_id: str) -> Iterator[str]:
    """``run_id``; on the way out every container, network, volume and image labelled with
    it removed (an export's builds too, dangling layers included)."""
    try:
        yield run_id
    finally:
        remove_labelled(client, run_id=run_id)
        for image in client.images.list(filters={"label": f"{LABEL_RUN}={run_id}"}):
            client.images.remove(image.id, force=True)
        client.images.prune(filters={"dangling": True, "label": f"{LABEL_RUN}={run_id}"})


class ChatServer:
    """An OpenAI-compatible /v1/chat/completions on 127.0.0.1, replaying scripted replies in
    order ("DONE" once they run out); it keeps each request with its path and Authorization."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                content = outer.replies.pop(0) if outer.replies else "DONE"
                data = json.dumps(
                    {
                        "id": "chatcmpl-1",
                        "object": "chat.completion",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": content},
                            }
                        ],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 7},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def episode_record(
    scenario: str,
    agent: str,
    reward: float | None,
    *,
    seed: int = 1,
    difficulty: str = "easy",
    families: list[str] | None = None,
) -> EpisodeRecord:
    """A finished episode as the bench records it: scored ``reward`` (one check, passed at 1.0),
    or invalid (a boot failure) where ``reward`` is None."""
    verdict = (
        None if reward is None else Verdict(reward, [CheckResult("c", "t", reward == 1.0, True, 1, "d")])
    )
    return EpisodeRecord(
        run_id="r",
        episode_id=f"{scenario}-s{seed}-{agent}",
        scenario=scenario,
        difficulty=difficulty,
        seed=seed,
        agent=agent,
        families=families or [],
        status=EpisodeStatus.scored if reward is not None else EpisodeStatus.invalid,
        reward=reward,
        solved=reward == 1.0,
        steps=3,
        timings=Timings(reset=1, agent=2, verify=0.1),
        verdict=verdict,
        failure=None
        if reward is not None
        else Failure(kind=FailureKind.boot_failed, detail="StackError: boom"),
    )
