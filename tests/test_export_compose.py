"""`fixos export --format harbor` of a multi-host scenario: a docker-compose environment
whose ``main`` service is the login host and whose other services are the other hosts.

The live test runs the task as Harbor would (compose's services on one network, each
reachable by its name; solve.sh and test.sh in main) and asks what FixOS asks of
every scenario: the reference repair scores 1.0, doing nothing 0.0.
"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import docker
import paramiko
import pytest
import yaml
from helpers import removed_run

from fixos.exporter import export_harbor
from fixos.exporter.compose import compose_yaml, login_of, peer_key
from fixos.exporter.harbor import task_toml
from fixos.exporter.trial import build, run_trial
from fixos.scenarios.catalog import load_catalog
from fixos.stack.images import ensure_base
from fixos.stack.sources import pip_build_options

CATALOG = load_catalog()
MULTI = sorted(sid for sid, s in CATALOG.items() if len(s.hosts) > 1)
TRIAL = "split_1"
"""a stopped database on db and a stopped php-fpm on app, judged from web."""


def test_every_host_is_a_service_and_main_is_the_login_host() -> None:
    assert MULTI, "the catalogue has multi-host scenarios"
    for sid in MULTI:
        scenario = CATALOG[sid]
        services = yaml.safe_load(compose_yaml(scenario))["services"]
        login = login_of(scenario)
        assert services["main"]["hostname"] == login.name
        assert services["main"]["networks"]["default"]["aliases"] == [login.name]
        assert set(services) == {"main"} | {h.name for h in scenario.hosts if h.name != login.name}
        for spec in scenario.hosts:
            service = services["main" if spec.name == login.name else spec.name]
            assert service["environment"]["FIXOS_HOST"] == spec.name
            assert service["environment"]["FIXOS_ROLE"] == spec.role
            assert set(spec.caps) <= set(service["cap_add"])
        config = tomllib.loads(task_toml(scenario, 1))["environment"]
        assert config["memory_mb"] == login.memory_mb


def test_the_task_key_is_a_valid_ssh_key_and_the_same_for_the_same_seed(tmp_path: Path) -> None:
    scenario = CATALOG[TRIAL]
    private, public = peer_key(scenario, 1)
    assert peer_key(scenario, 1) == (private, public)
    assert peer_key(scenario, 2)[0] != private
    path = tmp_path / "key"
    path.write_text(private)
    path.chmod(0o600)
    key = paramiko.Ed25519Key.from_private_key_file(str(path))
    assert public.split()[1] == key.get_base64()
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True)
    assert derived.returncode == 0 and derived.stdout.split()[:2] == public.split()[:2], derived.stderr


# -- against a live engine ----------------------------------------------------


@pytest.fixture(scope="module")
def run_id(client: docker.DockerClient) -> Iterator[str]:
    with removed_run(client, f"test-export-compose-{os.urandom(4).hex()}") as run:
        yield run


@pytest.mark.live
def test_a_multi_host_task_scores_like_fixos_under_a_compose_run(
    client: docker.DockerClient, images: dict[str, str], run_id: str, tmp_path: Path
) -> None:
    [task] = export_harbor([CATALOG[TRIAL]], [1], tmp_path, client=client, images=images, run_id=run_id)
    share = task / "environment" / "task" / "usr" / "local" / "share" / "fixos"
    assert sorted(p.name for p in (share / "break-host.d").iterdir()) == ["app", "db", "web"]
    assert json.loads((task / "tests" / "spec.json").read_text())["login"] == "web"
    tag = f"fixos-export-test/{TRIAL}:{run_id}"
    base = ensure_base(client, lambda line: None)
    build(client, task, tag, run_id=run_id, buildargs={"BASE": base, "PIP_OPTIONS": pip_build_options()})
    solved = run_trial(client, task, tag, run_id=run_id, solve=True)
    assert solved.reward == {"reward": 1.0}, solved.test_output + solved.solve_output
    # the true report, naming faults on the peers, written on main and graded there
    assert solved.diagnosis is not None and solved.diagnosis["score"] == 1.0, solved.diagnosis
    assert {f["host"] for f in solved.diagnosis["per_fault"]} == {"app", "db"}
    untouched = run_trial(client, task, tag, run_id=run_id, solve=False)
    assert untouched.reward == {"reward": 0.0}, untouched.test_output
    failed = {c["name"] for c in untouched.checks if not c["passed"]}
    assert "mariadb is running on db" in failed and "php-fpm is running on app" in failed
