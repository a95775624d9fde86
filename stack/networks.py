"""Episode networks that do not run out.

Every episode gets a bridge network of its own. An engine hands those out from
its default address pools, which hold 31 networks unless its daemon was started
with more (``scripts/ensure-engine`` does that for the engine it starts); a few
benches with warm hosts, or many OpenEnv sessions, use them up. Past that, FixOS
takes small subnets of its own range (``FIXOS_ADDRESS_POOL``, default
10.213.0.0/16 cut into /24s), skipping the ones in use; the engine refuses one
that overlaps an existing network or a route of the machine, and the next is
tried. The addresses live on this machine's bridges only.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from typing import Any

import docker
from docker.errors import APIError
from docker.types import IPAMConfig, IPAMPool

from ..core.errors import StackError

DEFAULT_RANGE = "10.213.0.0/16"
SUBNET_PREFIX = 24
EXHAUSTED = "could not find an available, non-overlapping"


def own_range() -> ipaddress.IPv4Network:
    text = os.environ.get("FIXOS_ADDRESS_POOL", DEFAULT_RANGE).split(",")[0].removeprefix("base=")
    try:
        return ipaddress.IPv4Network(text, strict=False)
    except ValueError:
        raise StackError(f"FIXOS_ADDRESS_POOL: not an IPv4 network: {text[:60]!r}") from None


def _used(client: docker.DockerClient) -> set[ipaddress.IPv4Network]:
    used = set()
    for network in client.api.networks():
        for config in (network.get("IPAM") or {}).get("Config") or []:
            subnet = config.get("Subnet")
            if subnet and ":" not in subnet:
                used.add(ipaddress.IPv4Network(subnet, strict=False))
    return used


def _candidates(client: docker.DockerClient) -> Iterator[ipaddress.IPv4Network]:
    base = own_range()
    prefix = max(SUBNET_PREFIX, base.prefixlen)
    used = _used(client)
    for subnet in base.subnets(new_prefix=prefix):
        if not any(subnet.overlaps(u) for u in used):
            yield subnet


def create_network(client: docker.DockerClient, name: str, labels: dict[str, str]) -> Any:
    """A bridge network named ``name``: from the engine's pools, else from FixOS's own range."""
    try:
        return client.networks.create(name, driver="bridge", labels=labels)
    except APIError as exc:
        if EXHAUSTED not in str(exc.explanation or exc):
            raise
    last: APIError | None = None
    for subnet in _candidates(client):
        gateway = str(subnet.network_address + 1)
        ipam = IPAMConfig(pool_configs=[IPAMPool(subnet=str(subnet), gateway=gateway)])
        try:
            return client.networks.create(name, driver="bridge", labels=labels, ipam=ipam)
        except APIError as exc:  # taken meanwhile by another run, or a route of the machine
            last = exc
    raise StackError(
        f"no free subnet for network {name}: the engine's pools and {own_range()} are all in use"
        + (f" ({last.explanation})" if last is not None else "")
    )
