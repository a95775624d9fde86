"""Fixtures for tests against a real Docker engine (``make test`` starts one and builds images)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import docker
import pytest

from fixos.scenarios.schema import HostSpec
from fixos.shells.session import BashSession
from fixos.stack.engine import connect
from fixos.stack.hosts import LiveHost, Stack
from fixos.stack.images import ensure_image
from fixos.stack.leftovers import remove_labelled
from fixos.stack.pool import HostPool


@pytest.fixture(scope="session")
def client() -> docker.DockerClient:
    return connect()


@pytest.fixture(scope="session")
def images(client: docker.DockerClient) -> dict[str, str]:
    return {name: ensure_image(client, name, lambda line: None) for name in ("server", "inspector")}


@pytest.fixture
def test_run_id(client: docker.DockerClient) -> Iterator[str]:
    run_id = f"test-{secrets.token_hex(4)}"
    yield run_id
    remove_labelled(client, run_id=run_id)


@pytest.fixture
def live_host(client: docker.DockerClient, images: dict[str, str], test_run_id: str) -> Iterator[LiveHost]:
    """A booted host of its own (as an episode gets it), removed after the test."""
    stack = Stack(
        client, run_id=test_run_id, episode_id=test_run_id, hosts=[HostSpec(name="web")], images=images
    )
    try:
        stack.up()
        yield stack.hosts["web"]
    finally:
        stack.down()


@pytest.fixture(scope="module")
def warm_pool(client: docker.DockerClient, images: dict[str, str]) -> Iterator[HostPool]:
    """Booted hosts for a module's episodes (run id ``pool.run_id``), removed after the module."""
    run_id = f"test-pool-{secrets.token_hex(4)}"
    pool = HostPool(client, images, run_id=run_id, size=1, shapes=[[HostSpec(name="web")]])
    try:
        yield pool
    finally:
        pool.close()
        remove_labelled(client, run_id=run_id)


@pytest.fixture(params=["exec", "ssh"])
def any_shell(request, live_host: LiveHost) -> Iterator[BashSession]:
    """The same Shell contract over every transport."""
    opener = live_host.shell if request.param == "exec" else live_host.ssh_shell
    shell = opener(default_timeout=10)
    yield shell
    shell.close()
