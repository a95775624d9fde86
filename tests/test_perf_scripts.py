"""The benchmark scripts still run against the code they measure: a script is no test, and
one that subclasses FixOS's own classes breaks silently when their signatures move
(``make perf-sessions`` failed at its first reset for a day after ``open_episode`` took a
task). Each is run here at its smallest size, live, and its figures are checked for sense.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from fixos.scenarios.catalog import load_catalog

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def _script(name: str):
    sys.path.insert(0, str(SCRIPTS))  # the scripts import their neighbours by name
    try:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPTS))


@pytest.mark.live
def test_perf_sessions_measures_one_session(client, images) -> None:
    """One OpenEnv session against a real server: reset, two steps, a row of figures."""
    row = _script("perf_sessions").measure_sessions(client, images, load_catalog(), 1, steps=2, timeout=120)
    assert row["sessions"] == 1 and row["cold resets"] == 1, row  # opened while measured: not prepared
    assert 0.0 < row["reset p50 s"] < 60 and 0.0 < row["step p50 s"] < 30, row
    assert row["steps/s"] > 0, row


@pytest.mark.live
def test_perf_failing_measures_one_scenario() -> None:
    """oracle and nop at one seed, their verify medians and the ratio of the failing one."""
    figures = _script("perf_failing").measure_failing(1, ["easy_1"], say=lambda line: None)
    oracle, nop = figures["easy_1 verify oracle: median s"], figures["easy_1 verify nop: median s"]
    assert 0.0 < oracle < 60 and 0.0 < nop < 60, figures
    assert figures["easy_1 failing / passing verify"] == pytest.approx(nop / oracle), figures


@pytest.mark.live
def test_perf_harbor_weighs_fixos_own_work(client, images) -> None:
    """The ledger behind the ceiling line runs against the code it weighs (2 episodes); the
    ceiling is Harbor's CPU over FixOS's without its own work (its process and the judge),
    the split gives each spender and the rest, and an impossible weight (more than the
    episode) is refused rather than printed."""
    perf_harbor = _script("perf_harbor")
    spent = perf_harbor.spenders(client, images, load_catalog(), 2, 2)
    own = sum(spent[f"{name}: CPU-s per episode"] for name in perf_harbor.OWN)
    assert 0.0 < own < 2.0, spent  # a process and a judge, well under a whole episode
    assert spent["hosts: CPU-s per episode"] > 0.3, spent  # two starts of MariaDB alone cost more
    per_episode = {f"{name}: CPU-s per episode" for name in perf_harbor.SPENDERS}
    assert per_episode <= set(spent), spent  # every spender the split names is the ledger's

    def ledger(fixos: float) -> dict[str, float]:
        return {
            "hosts: CPU-s per episode": 1.0,
            "engine (dockerd, containerd): CPU-s per episode": 0.3,
            "shims: CPU-s per episode": 0.02,
            "FixOS (this process): CPU-s per episode": fixos,
            "judge: CPU-s per episode": 0.05,
            "counted: CPU-s per episode": 1.37 + fixos,
            "machine-wide (/proc/stat): CPU-s per episode": 1.8,
        }

    rows = {"harbor_cpu": [40.0, 44.0], "fixos_cpu": [16.0, 14.0]}  # CPU-s of rounds of 8
    got = perf_harbor.ceiling(rows, 8, "8 trials", ledger_of=lambda: ledger(0.2))
    assert got["Harbor / that (8 trials): the CPU ratio with FixOS's own work free"] == pytest.approx(
        5.25 / (1.875 - 0.25)
    )
    own_line = "FixOS's own work (its process, the judge), 8 trials: CPU-s per episode"
    assert got[own_line] == pytest.approx(0.25)
    rest = "the ledger's run (8 trials), the rest (the kernel, anything else): CPU-s per episode"
    assert got[rest] == pytest.approx(1.8 - 1.57)
    hosts = f"the ledger's run (8 trials), {perf_harbor.SPENDERS['hosts']}: CPU-s per episode"
    assert got[hosts] == 1.0
    with pytest.raises(RuntimeError, match="own work"):
        perf_harbor.ceiling(rows, 8, "8 trials", ledger_of=lambda: ledger(2.0))
