"""Fixtures for tests against a real Docker engine (``make test`` starts one and builds images)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import docker
import helpers
import pytest

from fixos.scenarios.schema import HostSpec
from fixos.shells.session import BashSession
from fixos.stack.engine import connect
from fixos.stack.hosts import LiveHost
from fixos.stack.images import ensure_image
from fixos.stack.leftovers import remove_labelled
from fixos.stack.pool import HostPool
from fixos.verifier import Probe, backend


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shard",
        default=None,
        metavar="K/N",
        help="run only the K-th of N interleaved parts of the selected tests (make nightly's shards)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--shard K/N``: every N-th test from the K-th, in collection order (interleaved, so
    that each shard gets its share of every module's cheap and costly cases)."""
    shard = config.getoption("--shard")
    if not shard:
        return
    try:
        kept = helpers.shard(items, shard)
    except ValueError:
        raise pytest.UsageError(f"--shard: expected K/N with 1 <= K <= N, got {shard!r}") from None
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


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
    with helpers.booted(client, images, test_run_id) as host:
        yield host


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


@pytest.fixture
def probe(live_host: LiveHost) -> Iterator[Probe]:
    """What a check sees of ``live_host`` from inside it (the exported verifier's vantage)."""
    shell = live_host.shell(default_timeout=30)
    yield Probe(backend.testinfra_host(shell), shell, live_host)
    shell.close()
