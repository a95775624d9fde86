"""Each host's writable filesystem is bounded: writes past it fail inside the host or
the host is killed (the agent's failure), and the machine's disk is spared."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import docker
import pytest
from helpers import wait_for

from fixos.scenarios.schema import HostSpec
from fixos.stack import disk_guard
from fixos.stack.hosts import LiveHost, Stack

DISK_MB = 512


def test_the_bound_is_a_storage_opt_with_quotas_and_a_file_size_limit_without():
    assert disk_guard.host_storage_opt("quota", 2048) == {"size": "2048M"}
    assert disk_guard.host_ulimits("quota", 2048) is None
    assert disk_guard.host_storage_opt("watch", 2048) is None
    (fsize,) = disk_guard.host_ulimits("watch", 512) or []
    assert (fsize["Name"], fsize["Soft"], fsize["Hard"]) == ("fsize", 512 << 20, 512 << 20)
    assert HostSpec(name="web").disk_mb == 2048
    assert HostSpec(name="web", disk_mb=4096).disk_mb == 4096


def machine_free() -> int:
    stats = os.statvfs("/var/lib/docker" if os.path.isdir("/var/lib/docker") else "/")
    return stats.f_bavail * stats.f_frsize


@pytest.fixture
def stack(client: docker.DockerClient, images: dict[str, str], test_run_id: str) -> Iterator[Stack]:
    spec = HostSpec(name="web", disk_mb=DISK_MB)
    stack = Stack(client, run_id=test_run_id, episode_id=test_run_id, hosts=[spec], images=images)
    try:
        stack.up()
        yield stack
    finally:
        stack.down()


def in_host(client: docker.DockerClient, host: LiveHost, script: str) -> str:
    try:
        result = client.api.exec_create(host.handle.container_id, ["/bin/sh", "-c", script])
        return client.api.exec_start(result["Id"]).decode(errors="replace")
    except docker.errors.APIError as exc:  # the host was killed meanwhile
        return str(exc)


def running(client: docker.DockerClient, host: LiveHost) -> bool:
    return client.api.inspect_container(host.handle.container_id)["State"]["Running"]


@pytest.mark.live
def test_one_big_file_fails_inside_the_host(client, stack):
    host = stack.hosts["web"]
    before = machine_free()
    output = in_host(client, host, "fallocate -l 5G /big; echo rc=$?; ls -l /big 2>&1")
    spent = before - machine_free()
    # real quotas: the engine refuses the blocks; without, the file-size limit
    # fails fallocate (and dd, cat >) past the bound with EFBIG
    assert "rc=0" not in output, output
    assert running(client, host)
    assert spent < DISK_MB << 20, f"the machine lost {spent >> 20} MB"


@pytest.mark.live
def test_many_files_past_the_bound_end_the_host_and_spare_the_disk(client, stack):
    host = stack.hosts["web"]
    before = machine_free()
    # 100 files of 10 MB: each under the file-size limit, together twice the bound
    output = in_host(
        client,
        host,
        "for i in $(seq 100); do fallocate -l 10M /fill.$i || { echo failed at $i; break; }; done; echo done",
    )
    if stack.disk_watch is None:
        assert "failed at" in output, output
    else:
        wait_for(lambda: not running(client, host), timeout=disk_guard.WATCH_PERIOD * 5)
        assert host.handle.container_id in stack.disk_watch.overruns
    spent = before - machine_free()
    stack.down()
    time.sleep(0.5)
    after_removal = before - machine_free()
    assert min(spent, after_removal) < DISK_MB << 20, f"the machine lost {spent >> 20} MB"
    assert after_removal < DISK_MB << 20, f"the machine lost {after_removal >> 20} MB after removal"
