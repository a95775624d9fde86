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
    """The ledger behind the ceiling line runs against the code it weighs (2 episodes), and
    the ceiling is Harbor's CPU over FixOS's without its own work; an impossible weight
    (more than the episode) is refused rather than printed."""
    perf_harbor = _script("perf_harbor")
    own = perf_harbor.own_work(client, images, load_catalog(), 2, 2)
    assert 0.0 < own < 2.0, own  # a process and a judge, well under a whole episode
    rows = {"harbor_cpu": [40.0, 44.0], "fixos_cpu": [16.0, 14.0]}  # CPU-s of rounds of 8
    got = perf_harbor.ceiling(rows, 8, "8 trials", ledger_of=lambda: 0.25)
    assert got["Harbor / that (8 trials): the CPU ratio with FixOS's own work free"] == pytest.approx(
        5.25 / (1.875 - 0.25)
    )
    with pytest.raises(RuntimeError, match="own work"):
        perf_harbor.ceiling(rows, 8, "8 trials", ledger_of=lambda: 2.0)
