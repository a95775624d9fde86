"""The wheel works outside the repository: built from a copy of the sources, installed
into a fresh venv (dependencies from the index this machine's pip is configured with, its
cache), then run from a temporary directory with a clean environment. About 2 minutes,
most of it pip installing the dependencies."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from fixos.scenarios.catalog import load_catalog
from fixos.stack.images import IMAGES_DIR, content_hash

ROOT = Path(__file__).resolve().parent.parent
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "results", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".*_cache", ".fixos"
)
ENGINE_VARIABLES = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A copy, so the build leaves no build/ or egg-info in the repository.
    sources = tmp_path_factory.mktemp("sources") / "fixos"
    shutil.copytree(ROOT, sources, ignore=NOT_SOURCES)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(sources)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    [built] = dist.glob("fixos-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    installed = subprocess.run(
        [str(where / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    return where


@pytest.fixture
def elsewhere(tmp_path: Path, venv: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A working directory outside the repository and an environment with nothing of it."""
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.defpath}", "HOME": str(Path.home()), "LANG": "C.UTF-8"}
    env |= {name: os.environ[name] for name in ENGINE_VARIABLES if name in os.environ}
    yield tmp_path, env


def fixos(venv: Path, where: tuple[Path, dict[str, str]], *args: str, timeout: float = 60) -> str:
    cwd, env = where
    done = subprocess.run(
        [str(venv / "bin" / "fixos"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"fixos {' '.join(args)}: {done.stdout[-1500:]}{done.stderr[-1500:]}"
    return done.stdout


def test_the_wheel_holds_one_namespace_and_its_data(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        entries = {info.filename: info for info in archive.infolist()}
        entry_points = archive.read(next(n for n in entries if n.endswith(".dist-info/entry_points.txt")))
    assert {name.split("/")[0] for name in entries} == {"fixos", wheel.name.split("-py3")[0] + ".dist-info"}
    assert not [name for name in entries if "__pycache__" in name or name.endswith(".pyc")]
    scenarios = {p.name for p in (ROOT / "scenarios").glob("*.yaml")}
    assert scenarios and {n.split("/")[-1] for n in entries if n.startswith("fixos/scenarios/")} >= scenarios
    images = {
        p.relative_to(ROOT).as_posix(): p.stat().st_mode & 0o100
        for p in (ROOT / "images").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    shipped = {name.removeprefix("fixos/"): entries[name].external_attr >> 16 & 0o100 for name in entries}
    assert {name: shipped.get(name) for name in images} == images  # every file, its exec bit kept
    assert "fixos/exporter/templates/verify_task.py" in entries
    assert "fixos = fixos.cli:entry" in entry_points.decode()
    assert "server = fixos.server.app:main" in entry_points.decode()


def test_the_installed_fixos_is_its_own(venv: Path, elsewhere: tuple[Path, dict[str, str]]):
    """Imported from the venv, with its images hashing as the repository's do (same tag, no rebuild)."""
    cwd, env = elsewhere
    probe = (
        "import fixos.stack.images as i, fixos.scenarios.schema as s; "
        "print(i.IMAGES_DIR); print(s.SCENARIO_DIR); print(i.content_hash(i.IMAGES_DIR / 'server', 'base'))"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    images_dir, scenario_dir, digest = out
    assert Path(images_dir).is_relative_to(venv) and Path(scenario_dir).is_relative_to(venv)
    assert digest == content_hash(IMAGES_DIR / "server", "base")


def test_fixos_list_shows_every_scenario(venv: Path, elsewhere: tuple[Path, dict[str, str]]):
    listed = fixos(venv, elsewhere, "list")
    assert set(re.findall(r"^│ (\S+)\s+│", listed, re.M)) == set(load_catalog(ROOT / "scenarios"))


@pytest.mark.live
def test_fixos_run_oracle_scores_one(
    venv: Path, elsewhere: tuple[Path, dict[str, str]], client: docker.DockerClient, images: dict[str, str]
):
    out = fixos(venv, elsewhere, "run", "easy_1", "--agent", "oracle", timeout=300)
    [episodes] = (elsewhere[0] / "results").glob("*/episodes.jsonl")
    [record] = [json.loads(line) for line in episodes.read_text().splitlines()]
    assert (record["scenario"], record["status"], record["reward"]) == ("easy_1", "scored", 1.0), out
    # The same engine and the image the repository's fixos built: nothing was rebuilt.
    assert record["images"][images["server"]] == client.images.get(images["server"]).id
    assert all(client.images.get(tag).id == image_id for tag, image_id in record["images"].items())
    assert "building" not in out
