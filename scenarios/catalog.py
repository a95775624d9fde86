"""All scenarios under scenarios/, validated against the fault and check registries."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import FixOSError, ScenarioError
from ..injector import FAULTS
from ..verifier import CHECKS
from .schema import SCENARIO_DIR, Scenario, load_scenario

DIFFICULTIES = ("easy", "medium", "hard")


def load_catalog(directory: Path = SCENARIO_DIR) -> dict[str, Scenario]:
    """Every ``*.yaml`` in ``directory``; a directory that is missing or holds none is an error,
    never an empty catalog (a mistyped --scenario-dir would otherwise look like no scenarios)."""
    if not directory.is_dir():
        problem = "does not exist" if not directory.exists() else "is not a directory"
        raise ScenarioError(str(directory), "--scenario-dir", problem)
    paths = sorted(directory.glob("*.yaml"))
    if not paths:
        raise ScenarioError(str(directory), "--scenario-dir", "holds no scenario files (*.yaml)")
    scenarios: dict[str, Scenario] = {}
    for path in paths:
        scenario = load_scenario(path, faults=FAULTS, checks=CHECKS)
        scenarios[scenario.id] = scenario
    return dict(sorted(scenarios.items(), key=lambda kv: (DIFFICULTIES.index(kv[1].difficulty), kv[0])))


def select(catalog: dict[str, Scenario], wanted: list[str] | None) -> list[Scenario]:
    """Scenarios by id or by difficulty (``easy``, ``medium``, ``hard``); all when none given."""
    if not wanted:
        return list(catalog.values())
    chosen: list[Scenario] = []
    for word in wanted:
        for part in word.split(","):
            if part in DIFFICULTIES:
                matches = [s for s in catalog.values() if s.difficulty == part]
            elif part in catalog:
                matches = [catalog[part]]
            else:
                raise FixOSError(
                    f"no scenario {part!r}; choose ids from `fixos list` or one of {DIFFICULTIES}"
                )
            chosen += [s for s in matches if s not in chosen]
    return chosen
