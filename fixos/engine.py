"""The Docker engine connection: one client per engine, with a clear error when none answers."""

from __future__ import annotations

import docker
from docker.errors import DockerException

from fixos.errors import EngineError


def connect(base_url: str | None = None) -> docker.DockerClient:
    """A client for ``base_url`` (or DOCKER_HOST / the local socket) that has answered a ping."""
    try:
        if base_url:
            client = docker.DockerClient(base_url=base_url, version="auto", timeout=120)
        else:
            client = docker.from_env(version="auto", timeout=120)
        client.ping()
    except DockerException as exc:
        where = base_url or "the local Docker socket"
        raise EngineError(
            f"no Docker engine answers at {where} ({exc.__class__.__name__}); "
            "run `make setup` (installs and starts one when root on Debian) or start Docker"
        ) from None
    return client
