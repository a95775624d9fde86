"""`fixos export --format harbor` of an HTTPS scenario: the task's host gets the captured
host's healthy certificates, the exported verifier trusts the episode CA's certificate
from tests/spec.json (out of the agent's reach), and the CA's private key is nowhere in
the task. The live test runs the task with FixOS's own runner of a task (``exporter.trial``;
`make harbor-check` runs tls_1 under Harbor itself): oracle 1.0, nop 0.0, the HTTPS
check judged against that CA (before this, every TLS task scored its oracle 0: the
exported verifier had no CA and said so). The task is exported as if a year ago:
its certificates must outlive that (an episode's last 90 days).
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from helpers import removed_run

from fixos.episodes.phases import check_entries
from fixos.exporter import export_harbor
from fixos.exporter.tls import EXPORT_VALIDITY, about_https
from fixos.exporter.trial import build, run_trial
from fixos.scenarios.catalog import load_catalog
from fixos.stack.images import ensure_base
from fixos.stack.sources import pip_build_options
from fixos.stack.tls import TLS_DIR, Validity

CATALOG = load_catalog()
TRIAL = "tls_1"
"""the site's expired previous certificate served (the config names it, or it was copied over)."""
TLS_CHECK = "the shop answers over https with a certificate browsers trust"


def test_only_scenarios_about_https_carry_certificates() -> None:
    about = {sid for sid, s in CATALOG.items() if about_https(s, check_entries(s))}
    assert {"tls_1", "tls_2", "tls_3"} <= about
    assert not about & {"easy_1", "hard_5", "split_1"}  # their exports stay byte for byte the same


@pytest.fixture
def run_id(client: docker.DockerClient) -> Iterator[str]:
    with removed_run(client, f"test-export-tls-{os.urandom(4).hex()}") as run:
        yield run


def _private_keys(task: Path) -> list[tuple[str, object]]:
    """(file, key) of every PEM private key written anywhere in the task."""
    found = []
    for path in sorted(p for p in task.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if b"PRIVATE KEY-----" in data and b"-----BEGIN" in data:
            start = data.index(b"-----BEGIN")
            key = serialization.load_pem_private_key(data[start:], password=None)
            found.append((path.relative_to(task).as_posix(), key))
    return found


def _public(key: object) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)  # type: ignore[attr-defined]


@pytest.mark.live
def test_an_https_task_scores_like_fixos_against_the_episode_ca(
    client: docker.DockerClient, images: dict[str, str], run_id: str, tmp_path: Path
) -> None:
    now = datetime.datetime.now(datetime.UTC)
    a_year_ago = Validity(days=EXPORT_VALIDITY.days, issued=now - datetime.timedelta(days=365))
    [task] = export_harbor(
        [CATALOG[TRIAL]], [1], tmp_path, client=client, images=images, run_id=run_id, tls_validity=a_year_ago
    )
    spec = json.loads((task / "tests" / "spec.json").read_text())
    ca_pem = spec["tls"]["ca_pem"]
    assert spec["tls"]["host"] == "web" and spec["baseline"][TLS_CHECK]["ca"] == ca_pem
    ca = x509.load_pem_x509_certificate(ca_pem.encode())
    shop = task / "environment" / "task" / TLS_DIR.lstrip("/")
    assert (shop / "ca.crt").read_text() == ca_pem  # the host's copy, as FixOS's hosts have it
    site = x509.load_pem_x509_certificate((shop / "shop.crt").read_bytes())
    assert site.issuer == ca.subject  # the episode's certificates, not the image's placeholder
    assert site.not_valid_before_utc < now - datetime.timedelta(days=364)  # issued a year back,
    assert site.not_valid_after_utc > now + datetime.timedelta(days=50 * 365)  # and still valid for long
    assert ca.not_valid_after_utc >= site.not_valid_after_utc
    keys = _private_keys(task)
    assert {name for name, _ in keys} >= {"environment/task/etc/ssl/shop/shop.key"}
    assert all(_public(key.public_key()) != _public(ca.public_key()) for _, key in keys)  # type: ignore[attr-defined]
    on_host = [name for name, _ in keys if name.startswith("environment/task/")]
    assert all(((task / name).stat().st_mode & 0o777) == 0o600 for name in on_host)

    tag = f"fixos-export-test/{TRIAL}:{run_id}"
    base = ensure_base(client, lambda line: None)
    build(client, task, tag, run_id=run_id, buildargs={"BASE": base, "PIP_OPTIONS": pip_build_options()})
    with ThreadPoolExecutor(max_workers=2) as side_by_side:
        trials = [
            side_by_side.submit(run_trial, client, task, tag, run_id=run_id, solve=s) for s in (True, False)
        ]
        solved, untouched = (t.result() for t in trials)
    assert solved.reward == {"reward": 1.0}, solved.test_output + solved.solve_output
    judged = {c["name"]: c for c in solved.checks}
    assert "certificate trusted" in judged[TLS_CHECK]["detail"]
    assert untouched.reward == {"reward": 0.0}, untouched.test_output
    rejected = {c["name"]: c for c in untouched.checks}[TLS_CHECK]
    assert not rejected["passed"] and "certificate rejected" in rejected["detail"], rejected
