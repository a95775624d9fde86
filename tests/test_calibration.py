"""Calibration's arithmetic: Wilson intervals, cells per level x agent, the table; and the
budget-limited oracle's scripts (the first k faults' fixes only)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from fixos.agents.base import agent_class, make_agent
from fixos.bench.calibration import cells, markdown, plot, wilson
from fixos.core.errors import FixOSError
from fixos.records.models import EpisodeRecord, EpisodeStatus, Timings
from fixos.scenarios.catalog import load_catalog

CATALOG = load_catalog()


def test_wilson_matches_known_values():
    lo, hi = wilson(20, 40)
    assert lo == pytest.approx(0.352, abs=1e-3) and hi == pytest.approx(0.648, abs=1e-3)
    assert wilson(0, 40)[0] == 0.0 and wilson(0, 40)[1] == pytest.approx(0.0876, abs=1e-3)
    assert wilson(40, 40)[1] == 1.0 and wilson(0, 0) == (0.0, 1.0)


def _record(scenario: str, agent: str, reward: float | None) -> EpisodeRecord:
    scored = reward is not None
    return EpisodeRecord(
        run_id="r",
        episode_id=f"{scenario}-{agent}",
        scenario=scenario,
        difficulty="easy",
        seed=1,
        agent=agent,
        status=EpisodeStatus.scored if scored else EpisodeStatus.invalid,
        reward=reward,
        solved=reward == 1.0,
        steps=1,
        timings=Timings(),
    )


def test_cells_count_solved_worlds_per_level_and_agent_and_invalid_apart():
    records = [
        _record("gen:1:1", "baseline", 1.0),
        _record("gen:1:2", "baseline", 0.5),
        _record("gen:1:3", "baseline", None),
        _record("gen:2:1", "baseline", 0.0),
        _record("gen:2:1", "first-fixes:1", 1.0),
    ]
    table = cells(records)
    first = next(c for c in table if (c.level, c.agent) == (1, "baseline"))
    assert (first.n, first.solved, first.invalid, first.mean_reward) == (2, 1, 1, 0.75)
    text = markdown(table)
    assert "| 1 | 1/2 = 0.50 [" in text and "1 invalid" in text and "| 2 | 0/1 = 0.00" in text
    assert text.splitlines()[0] == "| level | baseline | first-fixes:1 |"
    drawn = ET.fromstring(plot(table, "t"))  # well-formed SVG: a point per level and agent, each titled
    points = drawn.findall("{http://www.w3.org/2000/svg}circle")
    assert sorted((p.get("data-level"), p.get("data-agent")) for p in points) == [
        ("1", "baseline"),
        ("2", "baseline"),
        ("2", "first-fixes:1"),
    ]
    assert points[0].find("{http://www.w3.org/2000/svg}title").text.startswith("baseline, level 1: 1/2")


def test_the_budget_oracle_knows_the_first_k_faults_fixes_only():
    world = CATALOG["gen:5:1"]
    assert len(world.first_fixes) == len(world.faults) - 1
    for k, script in enumerate(world.first_fixes, 1):
        named = [f.name for f in world.faults if f"fix({f.name})" in str(script)]
        assert named == [f.name for f in world.faults[:k]], (k, named)
    agent = make_agent("first-fixes:2", solutions={"first_fixes:2": "echo two", "solution": "x"})
    assert agent.name == "first-fixes:2" and agent_class("first-fixes:2").solution_key == "first_fixes:2"
    with pytest.raises(FixOSError, match="K from 1 to 9"):
        agent_class("first-fixes:zero")
