"""Generated worlds without containers: the same id is the same world, byte for byte; no draw
composes faults whose claims fight; every world is a valid scenario whose checks nop
cannot pass by construction; the split rule; `gen:` ids wherever an id is taken."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fixos.core.errors import ScenarioError
from fixos.injector import FAULTS
from fixos.injector.conflicts import first_conflict
from fixos.injector.recipes import CAUSES, RECIPES
from fixos.scenarios.catalog import load_catalog, select
from fixos.scenarios.composed import world_data
from fixos.scenarios.generator import (
    DECOY_FILE,
    LEVELS,
    VERSION,
    _excluded,
    combination,
    draw,
    ids,
    is_control,
    parse_id,
    partial_omits,
    world_combination,
)
from fixos.scenarios.worlds import generated, held_out, split

CATALOG = load_catalog()


def _dump(scenario_id: str) -> str:
    level, n = parse_id(scenario_id)
    return json.dumps(world_data(scenario_id, level, draw(level, n)), sort_keys=True)


def test_the_same_id_is_the_same_world_in_another_process():
    wanted = [f"gen:{level}:{n}" for level in LEVELS for n in (1, 7, 123)]
    here = {i: _dump(i) for i in wanted}
    code = (
        "import json,sys\n"
        "from fixos.scenarios.composed import world_data\n"
        "from fixos.scenarios.generator import draw, parse_id\n"
        "out = {}\n"
        "for i in sys.argv[1:]:\n"
        "    level, n = parse_id(i)\n"
        "    out[i] = json.dumps(world_data(i, level, draw(level, n)), sort_keys=True)\n"
        "print(json.dumps(out))\n"
    )
    # another interpreter, another hash seed: nothing may depend on set order or id()
    env = {"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"}
    there = subprocess.run(
        [sys.executable, "-c", code, *wanted], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(there.stdout) == here


def test_different_ids_differ():
    worlds = {_dump(f"gen:{level}:{n}") for level in LEVELS for n in range(1, 41)}
    assert len(worlds) == 40 * len(LEVELS)


@pytest.mark.parametrize("level", sorted(LEVELS))
def test_thousands_of_draws_never_compose_a_conflict_and_each_meets_its_level(level: int):
    axes = LEVELS[level]
    for n in range(1, 601):
        drawn = draw(level, n)
        assert len(drawn) == axes.faults
        entries = [
            (d.host, d.recipe.type, FAULTS.get(d.recipe.type).Params.model_validate(d.params)) for d in drawn
        ]
        assert first_conflict(entries, FAULTS) is None, f"gen:{level}:{n}"
        assert not _excluded(drawn), f"gen:{level}:{n}"
        if axes.split_hosts is not None:
            assert any(d.role != "all" for d in drawn) == axes.split_hosts
        if axes.elsewhere:
            assert any(d.host != "web" for d in drawn), f"gen:{level}:{n}"
        if axes.culprit:
            assert any(d.recipe.culprit for d in drawn)
        if level > 1:
            assert partial_omits(drawn) is not None


def test_every_world_is_a_scenario_nop_cannot_pass():
    """Every scored check is one a fault breaks: its own, or a page one of them breaks."""
    for level in LEVELS:
        for n in range(1, 61):
            scenario = generated(f"gen:{level}:{n}")
            if is_control(level, n):  # nothing broken: nop is the right repair (test below)
                assert not scenario.faults and scenario.partial_solution is None, scenario.id
                continue
            level_, _ = parse_id(scenario.id)
            drawn = draw(level_, n)
            pages = {p for d in drawn for p in d.recipe.pages}
            own = {need.name for d in drawn for need in d.recipe.own}
            for check in scenario.checks:
                if not check.scored:
                    continue
                if check.type == "http_page" and check.name.startswith("the page "):
                    assert check.params.path in pages, (scenario.id, check.name)
                else:
                    assert check.name.removesuffix(f" on {check.host}") in own, (scenario.id, check.name)
            assert (scenario.partial_solution is not None) == (level > 1)
            assert f"generator-v{VERSION}" in scenario.tags


def test_the_instruction_speaks_of_symptoms_only():
    for level in LEVELS:
        for n in range(1, 41):
            text = generated(f"gen:{level}:{n}").instruction.lower()
            for recipe in RECIPES:
                assert recipe.type.replace("_", " ") not in text and recipe.type not in text


def test_every_recipe_has_a_known_cause_a_type_and_something_to_judge():
    for recipe in RECIPES:
        assert recipe.type in FAULTS and FAULTS.get(recipe.type).has_fix()
        assert recipe.cause in CAUSES
        assert recipe.own or recipe.pages, recipe.key
        assert {k for k, _ in recipe.excludes} <= {r.key for r in RECIPES}, recipe.key
        FAULTS.get(recipe.type).Params.model_validate(recipe.params(__import__("random").Random(1)))


def test_splits_follow_the_combination_never_the_number():
    seen: dict[str, str] = {}
    counts = {"train": 0, "dev": 0, "test": 0}
    for level in LEVELS:
        for n in range(1, 201):
            combo = world_combination(level, n)
            got = split(f"gen:{level}:{n}")
            assert seen.setdefault(combo, got) == got  # one combination, one split, whatever the id
            counts[got] += 1
    assert all(counts.values()), counts
    assert counts["train"] > counts["test"] > 0


def test_the_catalogues_combinations_are_never_trained_on():
    catalogue = held_out()
    assert len(catalogue) >= 40
    for level in LEVELS:
        for n in range(1, 201):
            if is_control(level, n):
                continue
            combo = combination(draw(level, n))
            if combo in catalogue:
                assert split(f"gen:{level}:{n}") == "test", f"gen:{level}:{n}"


def test_one_world_in_twenty_is_a_control_in_every_split_and_the_others_kept_their_faults():
    controls = [(level, n) for level in LEVELS for n in range(1, 401) if is_control(level, n)]
    assert 0.03 < len(controls) / (5 * 400) < 0.07
    assert {split(f"gen:{level}:{n}") for level, n in controls} == {"train", "dev", "test"}
    for level, n in controls[:12]:
        world = generated(f"gen:{level}:{n}")
        assert world.faults == [] and "control" in world.tags and f"generator-v{VERSION}" in world.tags
        assert world.solution.strip() == "true" and world.partial_solution is None
        assert (len(world.hosts) == 3) == (LEVELS[level].split_hosts or len(world.hosts) == 3)
        assert "if anything is" in world.instruction
    # version 2 added the controls only: a world that is not one draws what version 1 drew
    assert generated("gen:2:5").faults[0].type == draw(2, 5)[0].recipe.type


def test_listing_a_split_gives_only_that_split():
    for name in ("train", "dev", "test"):
        listed = list(ids(3, 8, name, held_out()))
        assert len(listed) == 8 and all(split(i) == name for i in listed)


def test_a_generated_id_is_taken_wherever_an_id_is():
    assert "gen:2:5" in CATALOG and CATALOG["gen:2:5"].id == "gen:2:5"
    assert select(CATALOG, ["gen:2:5", "easy_1"])[0].slug == "gen-2-5"
    assert "gen:2:5" not in list(CATALOG)  # listed only by `fixos list --generated`
    with pytest.raises(KeyError):
        CATALOG["gen_2_5"]
    with pytest.raises(ScenarioError, match="no level 9"):
        CATALOG["gen:9:1"]


def test_a_bad_generated_id_is_one_line_naming_it():
    result = subprocess.run(
        [sys.executable, "-m", "fixos.cli.main", "show-scenario", "gen:9:1"], capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "gen:9:1" in result.stderr and "Traceback" not in result.stderr


def test_levels_four_and_five_keep_a_decoy_where_removing_it_is_tempting():
    for level in LEVELS:
        for n in range(1, 41):
            if is_control(level, n):
                continue
            world = generated(f"gen:{level}:{n}")
            holders = [h.name for h in world.hosts if h.decoys]
            gates = [c for c in world.checks if c.name.startswith("last month's order archive")]
            if LEVELS[level].decoys == 0:
                assert holders == [] and gates == [], world.id
                continue
            assert len(holders) == 1 and [g.host for g in gates] == holders, world.id
            assert not gates[0].scored and gates[0].params.paths == [DECOY_FILE]
            filling = [
                world.host_of(f) for f in world.faults if getattr(f.params, "path", None) == "/var/log"
            ]
            if filling:
                assert holders == filling[:1], world.id  # beside the full /var/log
            assert "archive" not in world.instruction  # a decoy says nothing of itself
