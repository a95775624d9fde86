"""Generated worlds as scenarios: ``gen:<level>:<n>`` made on demand, and the split each belongs to."""

from __future__ import annotations

from functools import cache

from ..core.errors import ScenarioError
from ..core.models import InjectedFault
from ..injector import FAULTS
from ..injector.recipes import recipe_for
from ..verifier import CHECKS
from .composed import control_data, world_data
from .generator import ID, GeneratorError, draw, is_control, parse_id, split_of, world_combination
from .schema import SCENARIO_DIR, Scenario, parse_scenario
from .solution import render


def is_generated(scenario_id: object) -> bool:
    return isinstance(scenario_id, str) and ID.match(scenario_id) is not None


@cache
def generated(scenario_id: str) -> Scenario:
    """The world ``gen:LEVEL:N``, validated as a scenario file is (a failure names the id)."""
    try:
        level, n = parse_id(scenario_id)
        if is_control(level, n):
            data = control_data(scenario_id, level, n)
        else:
            data = world_data(scenario_id, level, draw(level, n))
    except GeneratorError as exc:
        raise ScenarioError(scenario_id, "id", str(exc)) from None
    return parse_scenario(data, scenario_id, faults=FAULTS, checks=CHECKS)


def _key(fault_type: str, params: dict[str, object]) -> str:
    """A hand-written fault's recipe key (its type where no recipe draws its variant)."""
    recipe = recipe_for(fault_type, params)
    return recipe.key if recipe else fault_type


@cache
def held_out() -> frozenset[str]:
    """The combinations of the shipped, hand-written catalogue: never in ``train``."""
    from .catalog import load_catalog

    combos = set()
    for scenario in load_catalog(SCENARIO_DIR).values():
        if not scenario.faults:  # a control: no combination (generated controls split one by one)
            continue
        roles = {h.name: h.role for h in scenario.hosts}
        parts = [
            f"{roles[scenario.host_of(f)]}/{_key(f.type, f.params.model_dump() if f.params else {})}"
            for f in scenario.faults
        ]
        topology = "split" if any(r != "all" for r in roles.values()) else "single"
        combos.add(topology + "|" + ",".join(sorted(parts)))
    return frozenset(combos)


def split(scenario_id: str) -> str:
    """train, dev or test: by what the world is, never by its number."""
    level, n = parse_id(scenario_id)
    return split_of(world_combination(level, n), held_out())


def reference_scripts(scenario: Scenario, faults: list[InjectedFault]) -> dict[str, str | None]:
    """The scripts the reference agents are handed, rendered for ``faults``: the solution, the
    partial one, and ``first_fixes:K`` (the repair of the first K faults, the whole one for
    K >= the faults: what ``first-fixes:K``, the budget-limited oracle, runs)."""
    scripts = [render(s, faults) for s in [*scenario.first_fixes, scenario.solution]]
    partial = scenario.partial_solution
    return {
        "solution": scripts[-1],
        "partial_solution": partial and render(partial, faults),
        **{f"first_fixes:{k}": scripts[min(k, len(scripts)) - 1] for k in range(1, 10)},
    }
