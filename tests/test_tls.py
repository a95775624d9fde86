"""The shop over HTTPS on a real host: 443 verifies against the episode's CA and no other,
each TLS fault (both of its variants) breaks ``tls_valid`` with evidence and its revert
restores it, and the CA's private key is nowhere on the host. One host serves the module."""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterator
from typing import Any

import docker
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from helpers import booted, until

from fixos.injector import FAULTS
from fixos.injector.base import fault_rng
from fixos.stack.hosts import LiveHost
from fixos.stack.tls import EpisodeCA
from fixos.verifier import CHECKS, Probe

pytestmark = pytest.mark.live

TLS_VALID = CHECKS.get("tls_valid")


@pytest.fixture(scope="module")
def web(client: docker.DockerClient, images: dict[str, str]) -> Iterator[LiveHost]:
    with booted(client, images, f"test-tls-{time.monotonic_ns() % 10**8}") as host:
        yield host


def _probe(host: LiveHost) -> Probe:
    # tls_valid looks only from outside (``access``): no session in or beside the host.
    return Probe(host=None, shell=None, access=host)  # type: ignore[arg-type]


def _healthy_baseline(check: Any, probe: Probe, timeout: float = 15.0) -> Any:
    """The healthy site's baseline, its page recorded: the previous case's revert may still
    be reloading nginx, or a loaded machine may drop one fetch (the snapshot then records
    no page, which the harness's healthy gate refuses; a test has no gate, so it waits)."""
    deadline = time.monotonic() + timeout
    while True:
        baseline = check.refine(probe, check.snapshot(probe))
        if baseline["page"] or time.monotonic() > deadline:
            return baseline
        time.sleep(0.2)


def test_healthy_host_verifies_against_the_episode_ca_and_no_other(web: LiveHost):
    check, probe = TLS_VALID(TLS_VALID.Params()), _probe(web)
    baseline = _healthy_baseline(check, probe)
    assert baseline["ca"] == web.tls.ca_pem
    assert baseline["page"], "the healthy site's page was not recorded over https"
    healthy = check.evaluate(probe, baseline)
    assert healthy.passed, healthy.detail
    stranger = check.evaluate(probe, {**baseline, "ca": EpisodeCA("stranger").pem()})
    assert not stranger.passed and "unable to get local issuer certificate" in stranger.detail, (
        stranger.detail
    )
    other_name = TLS_VALID(TLS_VALID.Params(name="www.tidewater.test")).evaluate(probe, baseline)
    assert not other_name.passed and "Hostname mismatch" in other_name.detail, other_name.detail


def _seed_for(fault_type: str, variant: str) -> int:
    """A seed whose draw gives ``variant`` (the faults draw it first: config below 0.5)."""
    for seed in range(1, 50):
        if (fault_rng(seed, 0, fault_type).random() < 0.5) == (variant == "config"):
            return seed
    raise AssertionError(f"no seed draws {variant} for {fault_type}")


FAULT_CASES = [
    ("tls_expired", "config", "certificate has expired"),
    ("tls_expired", "file", "certificate has expired"),
    ("tls_wrong_name", "config", "Hostname mismatch"),
    ("tls_wrong_name", "file", "Hostname mismatch"),
    ("tls_key_mismatch", "config", "no answer"),
    ("tls_key_mismatch", "file", "no answer"),
]


@pytest.mark.parametrize(
    ("fault_type", "variant", "evidence"), FAULT_CASES, ids=[f"{t}-{v}" for t, v, _ in FAULT_CASES]
)
def test_each_fault_breaks_tls_valid_and_its_revert_restores_it(web: LiveHost, fault_type, variant, evidence):
    check, probe = TLS_VALID(TLS_VALID.Params()), _probe(web)
    baseline = _healthy_baseline(check, probe)
    assert baseline["page"], "the healthy site's page was not recorded over https"
    cls = FAULTS.get(fault_type)
    fault = cls(cls.Params())
    with web.shell(default_timeout=30) as shell:
        seeded = fault.inject(shell, fault_rng(_seed_for(fault_type, variant), 0, fault_type))
        assert seeded["variant"] == variant
        try:
            deadline = time.monotonic() + 10
            while not (confirmed := fault.confirm(shell)).passed and time.monotonic() < deadline:
                time.sleep(0.2)
            assert confirmed.passed, confirmed.detail
            broken = until(check, probe, baseline, passed=False)
            assert not broken.passed and evidence in broken.detail, broken.detail
        finally:
            fault.revert(shell)
    repaired = until(check, probe, baseline, passed=True)
    assert repaired.passed, repaired.detail


_PEM_KEY = re.compile(rb"-----BEGIN ([A-Z ]*)PRIVATE KEY-----.+?-----END \1PRIVATE KEY-----", re.S)


def _private_keys(blob: bytes) -> list[Any]:
    """Every private key of a file, PEM or OpenSSH's own format (the SSH host keys made at
    first boot are in the writable layer)."""
    return [
        serialization.load_ssh_private_key(m.group(0), password=None)
        if m.group(1) == b"OPENSSH "
        else serialization.load_pem_private_key(m.group(0), password=None)
        for m in _PEM_KEY.finditer(blob)
    ]


def test_the_ca_key_is_nowhere_in_the_host(web: LiveHost):
    """Every file the episode added or changed (the engine's diff of the writable layer)
    and every file of the host's tmpfs mounts is searched for PEM private keys: the site's
    and the staging site's are there, none is the CA's (same public half as ca.crt)."""
    ca_public = x509.load_pem_x509_certificate(web.tls.ca_pem.encode()).public_key()
    added = [p for p, kind in web.changes().items() if kind in "AC"]
    # Regular files only (-D/-d skip: an archive of sysvinit's FIFO would never end).
    search = "xargs -0 grep -lsI -D skip -d skip -e 'PRIVATE KEY'; grep -rlsI -D skip -e 'PRIVATE KEY' "
    with web.shell(default_timeout=60) as shell:
        paths = " ".join(shlex.quote(p) for p in added)
        found = shell.run(
            f"printf '%s\\0' {paths} | {search} /var/log /run /tmp /dev/shm; true"
        ).output.split()
    contents = web.read_files(sorted(set(found)))
    keys = [
        key for blob in contents.values() if blob and b"PRIVATE KEY" in blob for key in _private_keys(blob)
    ]
    pem = sum(
        len(re.findall(rb"-----BEGIN (?:RSA |EC )?PRIVATE KEY-----", b or b"")) for b in contents.values()
    )
    assert pem >= 2, "the search did not even find the site's and the staging site's keys"
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert all(key.public_key().public_bytes(*spki) != ca_public.public_bytes(*spki) for key in keys)
