"""The Docker engine connection: one client per engine, with a clear error when none answers."""

from __future__ import annotations

from dataclasses import dataclass

import docker
from docker.errors import DockerException

from fixos.core.errors import EngineError


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


@dataclass
class Engine:
    """One Docker engine a run spreads episodes over, with the image tags present on it."""

    url: str
    """as given (``unix://…``, ``tcp://…``, ``ssh://…``), or ``local`` for DOCKER_HOST / the socket."""
    client: docker.DockerClient
    images: dict[str, str]


def shares(total: int, engines: int) -> list[int]:
    """``total`` episodes at a time split over engines as evenly as it goes (earlier ones get the rest)."""
    base, rest = divmod(total, engines)
    return [base + (1 if i < rest else 0) for i in range(engines)]
