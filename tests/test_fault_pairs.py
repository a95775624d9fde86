"""Faults compose: any two fault types the catalogue calls compatible can be injected
on one live host and both confirmed; the pairs it calls conflicting are refused at
scenario load time, naming the field and the reason.

The cases are tests/test_faults.py's (one representative params set per variant of
each type), so a new fault type joins the sweep by joining that table. CI runs a
deterministic subset that pairs every case twice (FIXOS_FAULT_PAIRS=all: every
compatible pair), side by side on warm hosts, one fresh host per pair.
"""

from __future__ import annotations

import itertools
import os
import random
import secrets
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest
from test_faults import CASES

from fixos.core.errors import FixOSError, InvalidEpisode, ScenarioError, StackError
from fixos.core.models import Outcome
from fixos.core.registry import Registry
from fixos.injector import FAULTS
from fixos.injector.base import Fault, FaultParams, inject_all
from fixos.injector.conflicts import claims_of, conflict, declares_claims, first_conflict
from fixos.records.rundir import RunDir
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.schema import HostSpec, parse_scenario
from fixos.shells.base import Shell
from fixos.stack.leftovers import remove_labelled
from fixos.stack.pool import HostPool
from fixos.verifier import CHECKS

ROOT = Path(__file__).resolve().parent.parent
PARALLEL = int(os.environ.get("FIXOS_SCENARIO_JOBS", "3"))
HOST = [HostSpec(name="web")]
HARNESS = "harness: "
Case = tuple[str, dict]


def _id(case: Case) -> str:
    return f"{case[0]}-{'-'.join(map(str, case[1].values()))}".rstrip("-")


def _verdict(a: Case, b: Case) -> str | None:
    """Why the catalogue refuses ``a`` and ``b`` on one host, or None if it accepts them."""
    (ta, pa), (tb, pb) = a, b
    ca, cb = FAULTS.get(ta), FAULTS.get(tb)
    return conflict(
        ta, claims_of(ca, ca.Params.model_validate(pa)), tb, claims_of(cb, cb.Params.model_validate(pb))
    )


PINNED_AFTER_FORK: tuple[Case, Case] = (
    ("config_broken", {"service": "mariadb"}),
    ("cpu_hog", {"pids": [905, 906]}),
)
ALL_PAIRS = [(a, b) for a, b in itertools.combinations(CASES, 2) if a != b]
COMPATIBLE = [(a, b) for a, b in ALL_PAIRS if _verdict(a, b) is None]
CONFLICTING = [(a, b, _verdict(a, b)) for a, b in ALL_PAIRS if _verdict(a, b) is not None]


def representative(pairs: list[tuple[Case, Case]], rounds: int = 1) -> list[tuple[Case, Case]]:
    """Pairs in which every case appears at least ``rounds`` times, chosen greedily in table
    order (deterministic): a case short of partners takes the first compatible one that is
    short too, else the first compatible one."""
    chosen: list[tuple[Case, Case]] = []
    seen = {_id(c): 0 for c in CASES}
    for r in range(rounds):
        for case in CASES:
            if seen[_id(case)] > r:
                continue
            options = [(a, b) for a, b in pairs if case in (a, b) and (a, b) not in chosen]
            short = [(a, b) for a, b in options if seen[_id(b if case == a else a)] <= r]
            for a, b in (short or options)[:1]:
                chosen.append((a, b))
                seen[_id(a)] += 1
                seen[_id(b)] += 1
    # The held-out combination of issue 13 that once made every episode invalid.
    held_out = [c for c in CASES if c[0] in ("memory_hog", "service_killer")]
    held_out += [c for c in CASES if c == ("permissions_broken", {"target": "web_root"})]
    for pair in itertools.combinations(held_out, 2):
        for a, b in (pair, pair[::-1]):
            if (a, b) in pairs and (a, b) not in chosen:
                chosen.append((a, b))
    # A forking fault listed before a pinned-PID one: MariaDB's failed start forked past
    # the pinned PIDs (the one invalid pair of the full sweep) until pinned faults injected first.
    if PINNED_AFTER_FORK in pairs and PINNED_AFTER_FORK not in chosen:
        chosen.append(PINNED_AFTER_FORK)
    return chosen


# The sweep takes the newest cases' pairs first: a sweep cut short has covered the new types.
SWEEP = sorted(COMPATIBLE, key=lambda p: (-max(CASES.index(p[0]), CASES.index(p[1])), CASES.index(p[0])))
SELECTED = SWEEP if os.environ.get("FIXOS_FAULT_PAIRS") == "all" else representative(COMPATIBLE)


def test_every_fault_type_declares_what_it_claims():
    assert [n for n in FAULTS.names() if not declares_claims(FAULTS.get(n))] == []


def test_every_case_is_paired_in_ci():
    paired = {_id(c) for pair in representative(COMPATIBLE) for c in pair}
    assert {_id(c) for c in CASES} - paired == set()


def test_declared_conflicts_are_few_and_have_reasons():
    """The catalogue refuses only what truly conflicts; print the table for the notes."""
    for a, b, reason in CONFLICTING:
        print(f"{_id(a)} x {_id(b)}: {reason}")
        assert len(reason) > 20
    assert len(CONFLICTING) < len(ALL_PAIRS) / 4


def test_a_pinned_pid_fault_injects_before_the_faults_listed_ahead_of_it():
    """The order of inject calls, not the list's: the pinned fault first, the rest as listed,
    and each fault's seeded values back at its own index."""
    order: list[str] = []

    class Pinnable(FaultParams):
        pid: int | None = None

    class Recorded(Fault):
        Params = Pinnable
        records = ("name",)

        def inject(self, shell: Shell, rng: random.Random) -> dict:
            order.append(self.type)
            return {"name": self.type}

        def confirm(self, shell: Shell) -> Outcome:
            return Outcome(True, "in")

    registry: Registry[Fault] = Registry("fault type")
    for name in ("forks", "also_forks", "pinned"):
        registry.register(type(name, (Recorded,), {"type": name}))
    faults = [
        ("web", "forks", Pinnable()),
        ("web", "pinned", Pinnable(pid=905)),
        ("web", "also_forks", Pinnable()),
    ]
    injected = inject_all(faults, {"web": None}, seed=1, registry=registry)  # type: ignore[dict-item]
    assert order == ["pinned", "forks", "also_forks"]
    assert [f.seeded["name"] for f in injected] == ["forks", "pinned", "also_forks"]


def _scenario(*faults: dict, hosts: list[dict] | None = None) -> dict:
    return {
        "id": "pair",
        "title": "two faults",
        "difficulty": "hard",
        "instruction": "The site is broken, please fix it.",
        "hosts": hosts or [{"name": "web"}],
        "faults": list(faults),
        "checks": [{"name": "nginx runs", "type": "service_running", "params": {"service": "nginx"}}],
        "solution": "true",
    }


def test_a_scenario_whose_faults_conflict_is_refused_naming_field_and_reason():
    data = _scenario(
        {"type": "service_stopped", "params": {"service": "mariadb"}},
        {"type": "memory_hog"},
        {"type": "connections_exhausted"},
    )
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data, "pair.yaml", faults=FAULTS, checks=CHECKS)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("pair.yaml: faults[2]: cannot share a host with faults[0]: ")
    assert "service:mariadb" in message and "service_stopped" in message


def test_the_same_faults_on_different_hosts_do_not_conflict():
    data = _scenario(
        {"type": "disk_fill", "params": {"percent": 97}},
        {"type": "deleted_open_file", "host": "other", "params": {"percent": 96}},
        hosts=[{"name": "web"}, {"name": "other"}],
    )
    assert parse_scenario(data, "pair.yaml", faults=FAULTS, checks=CHECKS).fault_types


def test_every_shipped_scenario_is_built_from_compatible_faults():
    catalog = load_catalog()
    for scenario in catalog.values():
        entries = [(scenario.host_of(f), f.type, f.params) for f in scenario.faults]
        assert first_conflict(entries, FAULTS) is None, scenario.id
    assert "hard_7" in catalog  # the held-out triple below comes from it


@pytest.fixture(scope="module")
def injected(
    request: pytest.FixtureRequest, client: docker.DockerClient, images: dict[str, str]
) -> Iterator[dict[str, str | None]]:
    """Every selected pair of this module injected on a fresh warm host, side by side:
    pair id -> None when both confirmed, else why not."""
    selected = [
        item.callspec.params["pair"]
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec") and "pair" in item.callspec.params
    ]
    run_id = f"test-pairs-{secrets.token_hex(4)}"
    pool = HostPool(client, images, run_id=run_id, size=PARALLEL, planned=[HOST] * len(selected))
    results: dict[str, str | None] = {}

    def one(index: int, pair: tuple[Case, Case]) -> None:
        key = f"{_id(pair[0])}+{_id(pair[1])}"
        for attempt in range(3):
            try:
                stack = pool.take(HOST, f"pair{index}-{attempt}")
                break
            except StackError as exc:  # a boot the busy engine refused (no network pool left...)
                if attempt == 2:
                    results[key] = f"{HARNESS}{exc}"
                    return
        try:
            with stack.hosts["web"].shell() as shell:
                faults = [("web", t, FAULTS.get(t).Params.model_validate(p)) for t, p in pair]
                inject_all(faults, {"web": shell}, seed=1)
            results[key] = None
        except InvalidEpisode as exc:
            results[key] = str(exc)
        except FixOSError as exc:  # a shell error while injecting: the pair's failure as well
            results[key] = f"{HARNESS}{exc}"
        finally:
            pool.discard(stack)
        print(f"pair {index}: {key}: {results[key] or 'both confirmed'}", flush=True)

    try:
        workers = ThreadPoolExecutor(max_workers=PARALLEL)
        try:
            for future in [workers.submit(one, i, p) for i, p in enumerate(selected)]:
                future.result()
        finally:  # Ctrl-C: the pairs not started are dropped, not run to the end
            workers.shutdown(cancel_futures=True)
        yield results
    finally:
        pool.close()
        remove_labelled(client, run_id=run_id)


@pytest.mark.live
@pytest.mark.parametrize("pair", SELECTED, ids=[f"{_id(a)}+{_id(b)}" for a, b in SELECTED])
def test_compatible_faults_both_confirm_on_one_host(injected: dict[str, str | None], pair):
    # A failure is never a skip: a pair the engine could not even host (after retries) or
    # whose injection broke the shell fails too, named, for a person to read.
    failure = injected[f"{_id(pair[0])}+{_id(pair[1])}"]
    assert failure is None, failure


HELD_OUT = (ROOT / "scenarios" / "hard_7.yaml").read_text()


@pytest.mark.live
def test_validate_accepts_the_held_out_triple_from_a_scenario_dir(tmp_path: Path):
    """memory hog + nginx watchdog + web-root permissions, as a user's own scenario file:
    oracle 1.0, nop 0.0, partial between (every episode was invalid before)."""
    (tmp_path / "held_out.yaml").write_text(HELD_OUT.replace("id: hard_7", "id: held_out"))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "fixos.cli",
            "--scenario-dir",
            str(tmp_path),
            "validate",
            "held_out",
            "--seeds",
            "2",
            "-j",
            "2",
            "--results",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    # side by side (-j 2), each episode made durable in the validation's run directory
    [run_dir] = (tmp_path / "results").iterdir()
    records = RunDir(tmp_path / "results", run_dir.name).records()
    assert sorted(r.agent for r in records) == ["nop", "oracle", "partial"]
