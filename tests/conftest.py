"""Fixtures for tests against a real Docker engine (``make test`` starts one and builds images)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import docker
import pytest

from fixos.engine import connect
from fixos.images import ensure_image
from fixos.stack import LABEL_RUN, remove_labelled
from shells.exec import ExecShell


@pytest.fixture(scope="session")
def client() -> docker.DockerClient:
    return connect()


@pytest.fixture(scope="session")
def images(client: docker.DockerClient) -> dict[str, str]:
    return {"server": ensure_image(client, "server", lambda line: None)}


@pytest.fixture
def test_run_id(client: docker.DockerClient) -> Iterator[str]:
    run_id = f"test-{secrets.token_hex(4)}"
    yield run_id
    remove_labelled(client, run_id=run_id)


@pytest.fixture
def server(client: docker.DockerClient, images: dict[str, str], test_run_id: str):
    """A booted server container of its own, removed after the test."""
    container = client.containers.run(
        images["server"],
        detach=True,
        name=f"fixos-{test_run_id}",
        labels={LABEL_RUN: test_run_id},
        mem_limit="512m",
        pids_limit=512,
    )
    yield container
    container.remove(force=True, v=True)


@pytest.fixture
def exec_shell(client: docker.DockerClient, server) -> Iterator[ExecShell]:
    shell = ExecShell(client.api, server.id, default_timeout=10)
    yield shell
    shell.close()
