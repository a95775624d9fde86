"""Healthy baselines kept on disk (``fixos.records.baselines``): recorded once per checks,
topology, images and verifier code, read by later runs, never read once any of those
changed."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from fixos.episodes.episode import Episode
from fixos.records.baselines import BaselineStore, baseline_key, code_digest, folders_digest
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.solution import render
from fixos.stack.pool import HostPool
from fixos.verifier import verify as verify_module

CHECKS = [("nginx runs", "service_running", "web", {"service": "nginx"})]
HOSTS = [{"name": "web", "role": "all"}]
IMAGES = {"server": "sha256:aaa", "inspector": "sha256:bbb"}


def test_a_changed_check_module_gives_another_code_digest(tmp_path: Path) -> None:
    import fixos.verifier

    source = Path(fixos.verifier.__path__[0])
    copy = tmp_path / "verifier"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = folders_digest([("fixos.verifier", copy)])
    assert before == folders_digest([("fixos.verifier", source)])
    files = copy / "files.py"
    files.write_text(files.read_text() + "\n# a changed line\n")
    assert folders_digest([("fixos.verifier", copy)]) != before


def test_scenarios_sharing_a_check_on_the_same_hosts_share_its_record(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    other = ("php runs", "service_running", "web", {"service": "php8.2-fpm"})
    keys, _ = store.find([*CHECKS, other], HOSTS, IMAGES)
    store.keep(keys, {"nginx runs": {"pid": [1]}, "php runs": {"pid": [2]}})
    third = ("mariadb runs", "service_running", "web", {"service": "mariadb"})
    _, found = BaselineStore(tmp_path).find([CHECKS[0], third], HOSTS, IMAGES)
    assert found == {"nginx runs": {"pid": [1]}}  # only the third is recorded anew


def test_the_key_changes_with_the_code_the_image_the_checks_and_the_hosts() -> None:
    key = baseline_key(CHECKS, HOSTS, IMAGES, code="c1")
    assert key == baseline_key(CHECKS, HOSTS, dict(IMAGES), code="c1")
    assert key != baseline_key(CHECKS, HOSTS, IMAGES, code="c2")
    assert key != baseline_key(CHECKS, HOSTS, {**IMAGES, "server": "sha256:ccc"}, code="c1")
    assert key != baseline_key([(*CHECKS[0][:3], {"service": "mariadb"})], HOSTS, IMAGES, code="c1")
    assert key != baseline_key(CHECKS, [{**HOSTS[0], "role": "web"}], IMAGES, code="c1")
    assert baseline_key(CHECKS, HOSTS, IMAGES) == baseline_key(CHECKS, HOSTS, IMAGES, code=code_digest())


def test_the_store_keeps_reads_and_ignores_what_does_not_read(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    keys, found = store.find(CHECKS, HOSTS, IMAGES)
    assert found == {} and list(keys) == ["nginx runs"]
    memory: dict = {}
    store.keep(keys, {"nginx runs": {"pid": [1, 2]}}, memory)
    key = keys["nginx runs"]
    assert memory == {key: {"nginx runs": {"pid": [1, 2]}}}
    assert BaselineStore(tmp_path).find(CHECKS, HOSTS, IMAGES) == (keys, {"nginx runs": {"pid": [1, 2]}})
    (tmp_path / f"{key}.json").write_text("{not json")
    assert store.get(key) is None
    assert list(tmp_path.glob(".baseline-*")) == []  # nothing half-written left behind


@pytest.mark.live
def test_a_later_run_reads_the_recorded_baseline_and_skips_the_healthy_snapshot(
    client, images, test_run_id, tmp_path, monkeypatch
):
    monkeypatch.setenv("FIXOS_CACHE_DIR", str(tmp_path))
    scenario = load_catalog()["easy_1"]
    with Episode(scenario, 1, client=client, images=images, run_id=test_run_id) as first:
        assert first.shell.run(render(scenario.solution, first.faults), timeout=60).ok
        assert first.verify().reward == 1.0
    recorded = list((tmp_path / "baselines").glob("*.json"))
    assert len(recorded) == len(scenario.checks)  # a record per check

    def no_snapshot(*args, **kwargs):
        raise AssertionError("the healthy hosts were recorded again")

    monkeypatch.setattr(verify_module, "snapshot", no_snapshot)
    # Another run, on a warm pool of its own: nothing in memory, the record on disk.
    pool = HostPool(client, images, run_id=f"{test_run_id}-b", size=1, planned=[scenario.hosts])
    try:
        started = time.monotonic()
        with Episode(scenario, 2, client=client, images=images, pool=pool) as later:
            assert time.monotonic() - started < 60
            assert later.shell.run(render(scenario.solution, later.faults), timeout=60).ok
            assert later.verify().reward == 1.0
        assert len(pool.baselines) == len(recorded)
        assert all(BaselineStore().get(key) == record for key, record in pool.baselines.items())
    finally:
        pool.close()
