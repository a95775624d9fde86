"""A bench over a Ray cluster: each episode a Ray task on a node that has a Docker engine.

A node offers engine slots as the custom resource ``fixos_engine`` (``ray start
--resources='{"fixos_engine": 2}'``: two episodes at a time there) and its tasks use the
engine the node was started with: DOCKER_HOST in the environment of ``ray start`` (its
workers inherit it), else the local socket. Hosts are reached on that engine's 127.0.0.1,
which is the node's own loopback, so a task never leaves its node.

The driver keeps the records: a task returns its record, steps and the small files of its
episode directory as data (a shared disk is not assumed), and the driver writes them into
its run directory as each task ends, so ``--resume``, the report and JUnit read the same
files as after a one-machine bench. Ctrl-C cancels the tasks (Ray raises KeyboardInterrupt
in a running one, whose episode tears down), then a sweep task on every node removes
whatever of the run is left on its engine. A task that fails (its node's engine lacks an
image and cannot build it, or is down) returns its error as data, naming its node, and the
driver ends the run with that one line; so does a task Ray itself lost (a node died).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from docker.errors import DockerException, ImageNotFound

from ..core.errors import FixOSError
from ..core.models import Step
from ..episodes.episode import run_episode
from ..records.failures import retry_wanted
from ..records.models import EpisodeRecord
from ..records.rundir import FAULTS, INTERRUPTED, REWARD, TRANSCRIPT, RunDir
from ..scenarios.schema import Scenario
from ..stack.engine import connect
from ..stack.images import IMAGES_DIR, OFFLINE_BASE, REGISTRY_BASE, ensure_image, image_tag
from ..stack.leftovers import remove_labelled, sweep_dead_runs
from .local import Events, Job, Plan

RESOURCE = os.environ.get("FIXOS_RAY_RESOURCE", "fixos_engine")
"""the custom resource a node offers, one unit per episode it may run at a time."""
MOST_FILE_BYTES = 4 * 2**20
"""an episode directory's file larger than this stays on the node (keys, notes are small)."""
CANCEL_WAIT = 120.0
"""seconds a cancelled task gets to tear its episode down before the sweep."""
BUILD = os.environ.get("FIXOS_RAY_BUILD") == "1"
"""build an image a node lacks there (minutes, and it needs the node's network); by default
such a node ends the run at once: a build with no way out stalls in apt for many minutes."""
_WRITTEN_BY_DRIVER = {TRANSCRIPT, REWARD, FAULTS, INTERRUPTED}


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise FixOSError("--ray needs Ray, an optional extra: pip install 'fixos[ray]'") from None
    return ray


# ---- on a node: these run inside Ray workers --------------------------------------------


def node_engine() -> str:
    """The engine this node's tasks use, as a record names it."""
    return os.environ.get("DOCKER_HOST") or "local"


def _where() -> str:
    ray = require_ray()
    return f"{node_engine()} on ray node {ray.util.get_node_ip_address()} ({socket.gethostname()})"


def _has(client: Any, tag: str) -> bool:
    try:
        client.images.get(tag)
    except ImageNotFound:
        return False
    return True


def _node_images(client: Any, names: Sequence[str], build: bool = False) -> dict[str, str]:
    """The tags of this tree's images on the node's engine (the same tags as on any engine
    with the same base); a missing one is built only if ``build``, else an error saying how
    to bring it there."""
    if build:
        return {name: ensure_image(client, name, lambda line: None) for name in names}
    wanted = os.environ.get("FIXOS_BASE_IMAGE")
    bases = [wanted] if wanted else [REGISTRY_BASE, OFFLINE_BASE]  # ensure_base's order
    base = next((b for b in bases if _has(client, b)), None)
    if base is None:
        raise FixOSError(
            f"no base image ({' or '.join(bases)}) on this engine; copy this tree's images there "
            "(docker save BASE fixos/server:TAG fixos/inspector:TAG | docker load) or let nodes "
            "build them (FIXOS_RAY_BUILD=1 for the driver)"
        )
    tags = {}
    for name in names:
        if not (IMAGES_DIR / name / "Dockerfile").is_file():
            raise FixOSError(f"no image named {name!r}: {IMAGES_DIR / name}/Dockerfile does not exist")
        tags[name] = image_tag(client, name, base)
        if not _has(client, tags[name]):
            raise FixOSError(
                f"image {tags[name]} missing on this engine (from {base}): copy it there (docker "
                f"save {tags[name]} | docker load), build it there (fixos setup), or let nodes build "
                "(FIXOS_RAY_BUILD=1 for the driver)"
            )
    return tags


def _failed(exc: BaseException) -> dict[str, Any]:
    """A task's error as data: one line naming the node (a raised error would reach the
    driver as a RayTaskError wrapping a traceback)."""
    detail = " ".join(str(exc).split())[:300] or type(exc).__name__
    return {"error": f"{_where()}: {detail}"}


def prepare_node(image_names: list[str], build: bool = False) -> dict[str, Any]:
    """Make the node's engine ready: leftovers of dead runs removed, images present (built
    there once if missing and ``build``, so the episode tasks after it only look them up)."""
    try:
        client = connect()
        try:
            swept = sweep_dead_runs(client)
            images = _node_images(client, image_names, build)
        finally:
            client.close()
    except Exception as exc:
        return _failed(exc)
    return {"where": _where(), "images": images, "swept": swept}


def episode_task(
    scenario: Scenario, seed: int, agent: str, run_id: str, transport: str, task: str = "repair"
) -> dict[str, Any]:
    """One job on this node's engine, with the bench's one retry of a harness failure;
    returned as plain data for the driver to write."""
    try:
        return _episode(scenario, seed, agent, run_id, transport, task)
    except Exception as exc:  # a harness failure is a record; this is the engine or the node
        return _failed(exc)


def _episode(
    scenario: Scenario, seed: int, agent: str, run_id: str, transport: str, task: str
) -> dict[str, Any]:
    client = connect()
    try:
        images = _node_images(client, sorted({h.image for h in scenario.hosts} | {"inspector"}))
        with tempfile.TemporaryDirectory(prefix="fixos-ray-episode-") as tmp:
            retried = False
            while True:
                record, steps = run_episode(
                    scenario, seed, agent, client=client, images=images, run_id=run_id,
                    transport=transport, workdir=Path(tmp), task=task,
                )  # fmt: skip
                if retry_wanted(record.failure) and not retried:
                    retried = True
                    continue
                break
            record.engine = _where()
            files = {
                str(p.relative_to(tmp)): p.read_bytes()
                for p in Path(tmp).rglob("*")
                if p.is_file() and p.name not in _WRITTEN_BY_DRIVER and p.stat().st_size <= MOST_FILE_BYTES
            }
    finally:
        client.close()
    return {
        "record": record.model_dump(mode="json"),
        "steps": [dataclasses.asdict(s) for s in steps],
        "files": files,
        "retried": retried,
    }


def sweep_node(run_id: str) -> int:
    """Remove what is left of one run on this node's engine (a cancelled task that was cut
    off before its episode's teardown could start); the engine may still be removing."""
    client = connect()
    try:
        for attempt in range(3):
            try:
                return remove_labelled(client, run_id=run_id)
            except DockerException:
                if attempt == 2:
                    raise
                time.sleep(0.5)
    finally:
        client.close()
    return 0


# ---- on the driver -----------------------------------------------------------------------


def engine_nodes(ray: Any) -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(RESOURCE, 0) >= 1]


class RayBench:
    """Runs a plan's jobs as Ray tasks over the cluster at ``address`` (``auto``: the cluster
    RAY_ADDRESS or this machine's latest ``ray start`` names); as many at a time as the
    nodes offer ``fixos_engine`` units."""

    def __init__(
        self,
        plan: Plan,
        run: RunDir,
        catalog: dict[str, Scenario],
        *,
        address: str,
        events: Events | None = None,
    ) -> None:
        self.plan, self.run, self.catalog = plan, run, catalog
        self.address = address
        self.events = events or Events()
        self.nodes: list[str] = []
        """where each node's episodes run, as the records name it (after ``connect``)."""
        self.ray: Any = None
        self.slots = 0

    def pending(self) -> list[Job]:
        done = {r.episode_id for r in self.run.records()}
        return [job for job in self.plan.jobs() if job.episode_id not in done]

    def records(self) -> list[EpisodeRecord]:
        return self.run.records()

    def connect(self) -> int:
        """Join the cluster and ready every engine node; returns the engine slots in all."""
        ray = self.ray = require_ray()
        try:
            ray.init(address=self.address, logging_level="ERROR", log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            detail = " ".join(str(exc).split())[:200]
            raise FixOSError(f"no Ray cluster at --ray {self.address}: {detail}") from None
        nodes = engine_nodes(ray)
        if not nodes:
            raise FixOSError(
                f"no node of the Ray cluster at {self.address} offers the {RESOURCE} resource; start "
                f"nodes with ray start --resources='{{\"{RESOURCE}\": 2}}' where a Docker engine runs"
            )
        names = sorted({h.image for s in self.plan.scenarios for h in self.catalog[s].hosts} | {"inspector"})
        refs = [self._on(node, prepare_node).remote(names, BUILD) for node in nodes]
        try:
            prepared = [
                _result(ray, ref, f"preparing ray node {node['NodeManagerAddress']}")
                for ref, node in zip(refs, nodes, strict=True)
            ]
        except BaseException:
            ray.shutdown()
            self.ray = None
            raise
        self.nodes = [p["where"] for p in prepared]
        self.slots = int(sum(n["Resources"][RESOURCE] for n in nodes))
        return self.slots

    def _on(self, node: dict[str, Any], function: Any) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
        return self.ray.remote(function).options(num_cpus=0, scheduling_strategy=strategy, max_retries=0)

    def execute(self, jobs: Sequence[Job] | None = None) -> None:
        """Run the pending jobs, never more in flight than the cluster has engine slots (so
        ``started`` means started); on Ctrl-C cancel them and sweep every node."""
        if self.ray is None:
            self.connect()
        ray, run_id, transport, level = self.ray, self.run.run_id, self.plan.transport, self.plan.task
        todo = list(self.pending() if jobs is None else jobs)
        # num_cpus=0: the engine slot is what an episode holds; Ray's CPU count is not the limit
        task = ray.remote(episode_task).options(num_cpus=0, resources={RESOURCE: 1}, max_retries=0)
        running: dict[Any, Job] = {}
        try:
            while todo or running:
                while todo and len(running) < self.slots:
                    job = todo.pop(0)
                    self.events.started(job)
                    scenario = self.catalog[job.scenario]
                    running[task.remote(scenario, job.seed, job.agent, run_id, transport, level)] = job
                finished, _ = ray.wait(list(running), num_returns=1)
                for ref in finished:
                    job = running.pop(ref)
                    self._write(_result(ray, ref, f"episode {job.episode_id}"))
        except BaseException:
            for ref in running:
                ray.cancel(ref, force=False)
            if running:  # each cancelled task tears its episode down; wait for that before sweeping
                ray.wait(list(running), num_returns=len(running), timeout=CANCEL_WAIT)
            raise
        finally:
            self._sweep()
            ray.shutdown()
            self.ray = None

    def _write(self, result: dict[str, Any]) -> None:
        record = EpisodeRecord.model_validate(result["record"])
        steps = [Step(**s) for s in result["steps"]]
        directory = self.run.episode_dir(record.episode_id)
        for name, data in result["files"].items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_bytes(data)
        self.run.write_episode(record, steps)
        self.events.finished(record, result["retried"])

    def _sweep(self) -> None:
        try:
            refs = [self._on(node, sweep_node).remote(self.run.run_id) for node in engine_nodes(self.ray)]
            self.ray.get(refs, timeout=CANCEL_WAIT)
        except Exception:  # never let the sweep replace the error or Ctrl-C being handled
            pass


def _result(ray: Any, ref: Any, what: str) -> dict[str, Any]:
    """A task's result, or the run ends with one line: the node's own error, or what Ray
    says went wrong (a worker or node that died), never a RayTaskError traceback."""
    try:
        result = ray.get(ref)
    except ray.exceptions.RayError as exc:
        lines = [line for line in str(exc).splitlines() if line.strip()]
        detail = lines[-1].strip() if lines else ""
        try:  # Ray's text names the node for a NodeDiedError, not for a crashed worker
            down = sorted({n["NodeManagerAddress"] for n in ray.nodes() if not n.get("Alive")})
        except Exception:
            down = []
        nodes = f"; nodes down: {', '.join(down)}" if down else ""
        raise FixOSError(f"{what}: Ray task failed ({type(exc).__name__}) {detail[:300]}{nodes}") from None
    if "error" in result:
        raise FixOSError(f"{what} failed on {result['error']}")
    return result
