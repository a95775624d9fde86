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

import contextlib
import ipaddress
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import docker
from docker.errors import APIError, NotFound
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


class EpisodeNetworks:
    """Where each stack's network comes from and where it goes after the stack.

    Alone (``keep=False``), a stack's network is made for it and removed after it. A warm
    pool keeps the networks its stacks leave empty and hands each to a later stack of the
    run: making and removing a bridge costs the engine ~0.13 CPU-s (its iptables rules),
    every episode. Nothing of an episode stays in an empty network: the hosts were its
    only members, and the engine drops their names with them (a host with NET_ADMIN
    changes its own namespace, never the bridge). What an episode does leave is this
    machine's neighbour entries on the bridge: a host's root (``CAP_NET_RAW``) can answer
    ARP for any address, and the next host given that address would be reached at a MAC
    it never had. A network is therefore passed on only once those entries are flushed,
    and only where the bridge is this machine's (a remote engine's networks are removed).
    The networks keep the run's labels, so the sweep of dead runs and ``fixos clean``
    remove the kept ones too.
    """

    def __init__(
        self, client: docker.DockerClient, *, keep: bool, wanted: Callable[[], bool] | None = None
    ) -> None:
        self._client, self._keep = client, keep
        self._wanted = wanted
        """whether a later stack may still take a network given back (a pool's plan says)."""
        self._free: list[Any] = []
        self._lock = threading.Lock()

    def take(self, name: str, labels: dict[str, str]) -> Any:
        with self._lock:
            if self._free:
                return self._free.pop()
        return create_network(self._client, name, labels)

    def give(self, network: Any) -> None:
        """Back from a stack that removed its hosts: kept when empty and wanted, else removed."""
        try:
            if self._keep and (self._wanted is None or self._wanted()):
                network.reload()
                if not network.attrs.get("Containers") and forget_neighbours(network):
                    with self._lock:
                        if self._keep:
                            self._free.append(network)
                            return
            network.remove()
        except NotFound:
            pass

    def close(self) -> None:
        """Remove every kept network; from now on each given back is removed at once."""
        with self._lock:
            self._keep = False
            kept, self._free = self._free, []
        for network in kept:
            with contextlib.suppress(NotFound):
                network.remove()


def bridge_device(network: Any) -> str:
    """The name of a bridge network's device on the engine's machine."""
    options = network.attrs.get("Options") or {}
    return options.get("com.docker.network.bridge.name") or "br-" + network.id[:12]


def forget_neighbours(network: Any) -> bool:
    """Flush every neighbour entry (IPv4 and IPv6, permanent ones too) of the network's
    bridge on this machine; False where the bridge is not this machine's or the flush
    failed (then the network is not passed on)."""
    device = bridge_device(network)
    if not os.path.isdir(f"/sys/class/net/{device}"):
        return False
    for family in ("-4", "-6"):
        try:
            done = subprocess.run(
                ["ip", family, "neigh", "flush", "dev", device, "nud", "all"],
                capture_output=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):  # no iproute2 here: make a new one each time
            return False
        if done.returncode != 0:
            return False
    return True
