"""Culprits that do not give themselves away: the healthy host runs innocent background
programs (a metrics agent, a queue worker, a log shipper, a backup job) that are part of
its steady state, and injected culprits are installed in seeded, plausible places, some
under an innocent's name. So "kill what runs from /usr/local/bin" or "kill what is not a
daemon" breaks the steady state, while the oracle's repair keeps it."""

from __future__ import annotations

import random
import secrets
import shlex
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import docker
import pytest

from fixos.agents.adversarial import STRATEGIES
from fixos.core.models import CommandResult, Verdict
from fixos.episodes.episode import Episode, run_episode
from fixos.exporter.pids import PID_OF
from fixos.injector.disk import HOLDERS
from fixos.injector.edit import spawn_command
from fixos.injector.process import HOG_NAMES, INNOCENT_PROGRAMS, CpuHog, culprit_path
from fixos.scenarios.catalog import load_catalog
from fixos.stack.leftovers import remove_labelled

CATALOG = load_catalog()
SCENARIO = "easy_4"  # a memory hog: the oracle kills it by PID
GATE = "steady: every program of the healthy host still runs"
INNOCENTS = {path.rsplit("/", 1)[1]: path for path in INNOCENT_PROGRAMS}


class _Recorder:
    """A Shell that only records what it is asked to run."""

    def __init__(self) -> None:
        self.commands: list[str] = []

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        self.commands.append(command)
        return CommandResult(command, "", 0, 0.0)


def test_culprit_paths_are_seeded_plausible_and_never_an_innocents() -> None:
    paths = {culprit_path(random.Random(seed), name) for seed in range(40) for name in INNOCENTS}
    assert not paths & INNOCENT_PROGRAMS
    folders = {p.rsplit("/", 1)[0] for p in paths}
    assert len(folders) >= 8, folders
    for top in ("/opt/", "/srv/", "/usr/lib/", "/home/deploy/", "/usr/local/bin/"):
        assert any(p.startswith(top) for p in paths), top


def test_a_hogs_path_depends_on_the_seed_and_is_what_inject_reports() -> None:
    seen = set()
    for seed in range(1, 9):
        hog, shell = CpuHog(CpuHog.Params()), _Recorder()
        hog.prepare(shell, random.Random(f"fixos:{seed}:0:cpu_hog"))
        assert hog.paths[0].endswith("/" + hog.names[0]) and shlex.quote(hog.paths[0]) in shell.commands[0]
        seen.add(hog.paths[0].rsplit("/", 1)[0])
    assert len(seen) >= 4, seen
    # Culprits may carry an innocent's name: name alone never tells them apart.
    assert {"log-shipper"} <= set(HOG_NAMES) and "metrics-agent" in dict(HOLDERS)


@pytest.fixture(scope="module")
def episodes(client: docker.DockerClient, images: dict[str, str]) -> Iterator[dict[str, Any]]:
    """Three episodes of one memory-hog scenario side by side: the oracle, "kill what runs
    from /usr/local/bin", and "kill every non-daemon"."""
    token = secrets.token_hex(4)
    run_ids = [f"test-culprits-{token}-{i}" for i in range(3)]  # one episode id each, same seed
    scenario = CATALOG[SCENARIO]

    def oracle() -> Any:
        return run_episode(scenario, 1, "oracle", client=client, images=images, run_id=run_ids[0])[0]

    def by_path() -> dict[str, Any]:
        with Episode(scenario, 1, client=client, images=images, run_id=run_ids[1]) as ep:
            found = {}
            for name, path in INNOCENTS.items():
                found[name] = ep.shell.run(f"pgrep -f '^[^ ]+ {path}$' | head -n 1").output.strip()
            # A namesake culprit elsewhere: pid_of finds it by its path, never the innocent.
            fake = "/srv/jobs/bin/metrics-agent"
            ep.shell.run(f"mkdir -p /srv/jobs/bin && cp {INNOCENTS['metrics-agent']} {fake}")
            namesake = ep.shell.run(spawn_command(fake, None)).output.split()[-1]
            # its PID is printed once forked, before it runs the script: until then no command
            # line names the path (a full `make test` once found none)
            started = (
                f"for i in $(seq 100); do grep -qF {fake} /proc/{namesake}/cmdline && exit; sleep 0.05; done"
            )
            started += "; exit 1"
            assert ep.shell.run(f"bash -c {shlex.quote(started)}").ok, "the namesake never ran its script"
            ask = "bash -c " + shlex.quote(PID_OF + 'pid_of "$@"') + f" pid_of {fake} 1"
            located = ep.shell.run(ask).output.strip()
            ep.shell.run(f"kill {namesake}")
            ep.shell.run("pkill -9 -f '^[^ ]+ /usr/local/bin/'; true")
            return {"found": found, "namesake": namesake, "located": located, "verdict": ep.verify()}

    def non_daemons() -> Verdict:
        with Episode(scenario, 1, client=client, images=images, run_id=run_ids[2]) as ep:
            for command in STRATEGIES["kill_non_daemons"].commands:
                ep.shell.run(command)
            return ep.verify()

    try:
        with ThreadPoolExecutor(3) as pool:
            futures = {name: pool.submit(fn) for name, fn in [("oracle", oracle), ("by_path", by_path)]}
            futures["non_daemons"] = pool.submit(non_daemons)
            yield {name: f.result() for name, f in futures.items()}
    finally:
        for run_id in run_ids:
            remove_labelled(client, run_id=run_id)


def _gate(verdict: Verdict) -> Any:
    return next(c for c in verdict.checks if c.name == GATE)


@pytest.mark.live
def test_the_innocents_run_and_survive_the_oracle(episodes: dict[str, Any]) -> None:
    assert all(pid.isdigit() for pid in episodes["by_path"]["found"].values()), episodes["by_path"]["found"]
    record = episodes["oracle"]
    assert record.reward == 1.0, [c.detail for c in record.verdict.checks if not c.passed]
    assert _gate(record.verdict).passed


@pytest.mark.live
def test_pid_of_finds_a_namesake_culprit_by_its_path(episodes: dict[str, Any]) -> None:
    run = episodes["by_path"]
    assert run["located"] == run["namesake"] != run["found"]["metrics-agent"]


@pytest.mark.live
def test_killing_what_runs_from_usr_local_bin_breaks_the_steady_state(episodes: dict[str, Any]) -> None:
    verdict = episodes["by_path"]["verdict"]
    assert verdict.reward == 0.0
    gate = _gate(verdict)
    assert not gate.passed and "log-shipper" in gate.detail


@pytest.mark.live
def test_killing_every_non_daemon_breaks_the_steady_state(episodes: dict[str, Any]) -> None:
    verdict = episodes["non_daemons"]
    scored = [c for c in verdict.checks if c.scored]
    assert all(c.passed for c in scored), "the hog itself is gone"
    gate = _gate(verdict)
    assert not gate.passed and verdict.reward == 0.0
    for name in INNOCENTS:
        assert name in gate.detail
