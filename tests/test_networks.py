"""Episode networks keep coming once the engine's own address pools are used up."""

from __future__ import annotations

import ipaddress

import docker
import pytest
from docker.errors import APIError

from fixos.stack.leftovers import remove_labelled
from fixos.stack.networks import EXHAUSTED, create_network, own_range


class _PoolsUsedUp:
    """An engine client whose default address pools are used up (the engine's own
    words), everything else passed through."""

    def __init__(self, client: docker.DockerClient) -> None:
        self.api = client.api
        self.networks = self
        self._networks = client.networks

    def create(self, name: str, **kwargs):
        if "ipam" not in kwargs:
            raise APIError("404", explanation=f"{EXHAUSTED} IPv4 address pool among the defaults")
        return self._networks.create(name, **kwargs)


@pytest.mark.live
def test_networks_come_from_fixos_range_when_the_engines_pools_run_out(
    client: docker.DockerClient, test_run_id: str
) -> None:
    engine = _PoolsUsedUp(client)
    labels = {"fixos.run": test_run_id}
    try:
        networks = [create_network(engine, f"fixos-{test_run_id}-{i}", labels) for i in range(3)]  # type: ignore[arg-type]
        subnets = []
        for network in networks:
            network.reload()
            subnets += [ipaddress.IPv4Network(c["Subnet"]) for c in network.attrs["IPAM"]["Config"]]
        assert len(subnets) == 3 and len(set(subnets)) == 3
        assert all(s.subnet_of(own_range()) and s.prefixlen == 24 for s in subnets), subnets
    finally:
        remove_labelled(client, run_id=test_run_id)


def test_a_bad_range_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXOS_ADDRESS_POOL", "ten.0.0.0/8")
    with pytest.raises(Exception, match=r"^FIXOS_ADDRESS_POOL: not an IPv4 network: 'ten.0.0.0/8'$"):
        own_range()
