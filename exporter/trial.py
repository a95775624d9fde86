"""FixOS's own runner of an exported task (not Harbor): build environment/, start it with
the command Harbor gives (`sleep infinity`), copy solution/ in and run solve.sh, copy
tests/ in and run test.sh, read /logs/verifier/reward.json (and diagnosis.json: the report's grade).

It exists so that `make test` can check an export's files without Harbor installed
(Harbor needs Python >= 3.12 and Compose v2). It is a re-implementation of Harbor's
steps as FixOS reads them, and proves nothing about Harbor itself: on the same
tasks, `make harbor-check` runs `harbor run` with Harbor's local Docker environment
(once, this runner gave 1.0 where Harbor gave 0.0: the networks differed)."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import yaml
from docker.errors import APIError, NotFound

from ..stack.hosts import LABEL_RUN
from ..stack.networks import create_network
from .harbor import READY_MARKER, ExportError
from .report import DIAGNOSIS_FILE

HARBOR_COMMAND = ["sh", "-c", "sleep infinity"]
READY_TIMEOUT = 180.0


@dataclass
class Trial:
    reward: dict[str, Any]
    checks: list[dict[str, Any]]
    boot_seconds: float
    """container start -> the host broke itself (READY_MARKER)."""
    solve_output: str
    test_output: str
    diagnosis: dict[str, Any] | None = None
    """the agent's report graded (``exporter.report``); None from a task exported without truth."""


def build(
    client: docker.DockerClient, task: Path, tag: str, *, run_id: str, buildargs: dict[str, str]
) -> float:
    """Build the task's environment (``buildargs``: BASE, PIP_OPTIONS); returns the seconds it took."""
    started = time.monotonic()
    try:
        for chunk in client.api.build(
            path=str(task / "environment"),
            tag=tag,
            buildargs=buildargs,
            labels={LABEL_RUN: run_id},
            rm=True,
            forcerm=True,
            decode=True,
        ):
            if "error" in chunk:
                raise ExportError(f"{task}/environment: build failed: {chunk['error'].strip()}")
    except APIError as exc:
        raise ExportError(f"{task}/environment: build failed: {exc.explanation}") from None
    return time.monotonic() - started


def _tar(directory: Path, name: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(directory, arcname=name)
    return buf.getvalue()


def _read(container: Any, path: str) -> bytes | None:
    try:
        stream, _ = container.get_archive(path)
    except NotFound:
        return None
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.next()
        extracted = tar.extractfile(member) if member else None
        return extracted.read() if extracted else None


def _compose_services(task: Path) -> dict[str, dict[str, Any]]:
    return yaml.safe_load((task / "environment" / "docker-compose.yaml").read_text())["services"]


def _container_options(task: Path, name: str = "main") -> dict[str, Any]:
    """What Harbor would give a service's container: task.toml's resources for main,
    docker-compose.yaml's for the others, and its extras."""
    service = _compose_services(task)[name]
    tmpfs = dict(entry.split(":", 1) for entry in service.get("tmpfs", []))
    if name == "main":
        config = tomllib.loads((task / "task.toml").read_text(encoding="utf-8"))["environment"]
        memory, cpus = f"{config['memory_mb']}m", float(config["cpus"])
    else:
        memory, cpus = service["mem_limit"], float(service["cpus"])
    options: dict[str, Any] = {
        "tmpfs": tmpfs,
        "cap_add": service.get("cap_add", []),
        "pids_limit": service.get("pids_limit"),
        "mem_limit": memory,
        "memswap_limit": memory,
        "nano_cpus": int(cpus * 1e9),
    }
    if "hostname" in service:
        options["hostname"] = service["hostname"]
    if "environment" in service:
        options["environment"] = {k: str(v) for k, v in service["environment"].items()}
    return options


def _start_services(
    client: docker.DockerClient, task: Path, image: str, *, run_id: str, label: str
) -> tuple[Any, dict[str, Any]]:
    """The network and the containers of a multi-host task's services, main included, as
    compose starts them: each reachable by its aliases. (None, {}) for a one-host task."""
    services = _compose_services(task)
    if len(services) == 1:
        return None, {}
    network = create_network(client, f"fixos-{label}", {LABEL_RUN: run_id})
    peers = {}
    for name, service in services.items():
        aliases = service.get("networks", {}).get("default", {}).get("aliases", [])
        peers[name] = client.containers.create(
            image,
            HARBOR_COMMAND,
            labels={LABEL_RUN: run_id},
            name=f"fixos-{label}-{name}",
            network=network.name,
            networking_config={network.name: client.api.create_endpoint_config(aliases=[name, *aliases])},
            **_container_options(task, name),
        )
    for container in peers.values():
        container.start()
    return network, peers


def run_trial(client: docker.DockerClient, task: Path, image: str, *, run_id: str, solve: bool) -> Trial:
    label = f"{run_id}-{task.name}-{'solve' if solve else 'nop'}"
    network, containers = _start_services(client, task, image, run_id=run_id, label=label)
    try:
        if network is None:
            containers["main"] = client.containers.run(
                image,
                HARBOR_COMMAND,
                detach=True,
                labels={LABEL_RUN: run_id},
                name=f"fixos-{label}",
                **_container_options(task),
            )
        return _trial(containers["main"], task, solve=solve)
    finally:
        for each in containers.values():
            with contextlib.suppress(NotFound):
                each.remove(force=True, v=True)
        if network is not None:
            with contextlib.suppress(NotFound):
                network.remove()


def _trial(container: Any, task: Path, *, solve: bool) -> Trial:
    started = time.monotonic()
    while container.exec_run(["test", "-e", READY_MARKER]).exit_code != 0:
        if time.monotonic() - started > READY_TIMEOUT:
            raise ExportError(f"{task.name}: {READY_MARKER} not there after {READY_TIMEOUT:g}s")
        time.sleep(0.2)
    boot = time.monotonic() - started
    solve_output = ""
    if solve:
        container.put_archive("/", _tar(task / "solution", "solution"))
        res = container.exec_run(["bash", "/solution/solve.sh"])
        solve_output = res.output.decode(errors="replace")
    container.put_archive("/", _tar(task / "tests", "tests"))
    res = container.exec_run(["bash", "/tests/test.sh"])
    reward = _read(container, "/logs/verifier/reward.json")
    checks = _read(container, "/logs/verifier/checks.json")
    if reward is None or checks is None:
        said = res.output.decode(errors="replace")
        raise ExportError(f"{task.name}: test.sh wrote no reward: {said[-500:]}")
    tested = res.output.decode(errors="replace")
    diagnosis = _read(container, f"/logs/verifier/{DIAGNOSIS_FILE}")
    return Trial(
        json.loads(reward),
        json.loads(checks),
        boot,
        solve_output,
        tested,
        json.loads(diagnosis) if diagnosis is not None else None,
    )
