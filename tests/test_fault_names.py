"""Faults are named, and a solution's template is checked when the scenario loads: a
positional, unknown or misspelt reference fails with one line naming file, field and line."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from helpers import scenario_yaml

from fixos.core.errors import FixOSError, ScenarioError
from fixos.core.models import Outcome
from fixos.core.registry import Registry
from fixos.injector import FAULTS, Fault, inject_all
from fixos.scenarios.schema import load_scenario
from fixos.scenarios.solution import Template
from fixos.verifier import CHECKS

SCENARIO = scenario_yaml(
    "named",
    difficulty="hard",
    faults="""\
        - name: squatter
          type: port_squatter
          params: {service: nginx, port: 80}
        - type: config_broken
          params: {service: nginx}
        - type: cpu_hog
        - type: cpu_hog
        """,
    solution="""\
        |
          kill {{ squatter.pid }} {{ cpu_hog_1.processes.0.pid }} {{ cpu_hog_2.processes.0.pid }}
          {{ fix(config_broken) }}
          service nginx start
        """,
)


def load(tmp_path: Path, text: str, faults: Registry[Fault] = FAULTS):
    path = tmp_path / "named.yaml"
    path.write_text(text)
    return load_scenario(path, faults=faults, checks=CHECKS)


def error(tmp_path: Path, text: str, faults: Registry[Fault] = FAULTS) -> str:
    with pytest.raises(ScenarioError) as caught:
        load(tmp_path, text, faults)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(tmp_path / "named.yaml") + ": ")
    return message.removeprefix(str(tmp_path / "named.yaml") + ": ")


def test_faults_get_their_given_or_default_names(tmp_path):
    scenario = load(tmp_path, SCENARIO)
    assert [f.name for f in scenario.faults] == ["squatter", "config_broken", "cpu_hog_1", "cpu_hog_2"]
    assert isinstance(scenario.solution, Template)
    assert scenario.solution.names == ("squatter", "config_broken", "cpu_hog_1", "cpu_hog_2")


@pytest.mark.parametrize(
    ("old", "new", "said"),
    [
        (
            "{{ squatter.pid }}",
            "{{ f0.pid }}",
            "solution line 1: {{ f0.pid }} refers to a fault by position; name it instead: "
            "{{ squatter.pid }} (faults[0] is 'squatter')",
        ),
        (
            "{{ squatter.pid }}",
            "{{ squater.pid }}",
            "solution line 1: {{ squater.pid }}: no fault named 'squater' "
            "(faults: squatter, config_broken, cpu_hog_1, cpu_hog_2)",
        ),
        (
            "{{ squatter.pid }}",
            "{{ squatter.port }}",
            "solution line 1: {{ squatter.port }}: fault type 'port_squatter' records no field 'port' "
            "(fields: name, pid, path)",
        ),
        (
            "{{ fix(config_broken) }}",
            "{{ fix config_broken }}",
            "solution line 2: {{ fix config_broken }}: not a template expression; "
            "write {{ NAME.field }} or {{ fix(NAME) }}",
        ),
        (
            "  - type: config_broken\n",
            "  - name: squatter\n    type: config_broken\n",
            "faults[1].name: duplicate fault name 'squatter' (a fault left unnamed is called by its type)",
        ),
        (
            "  - type: config_broken\n",
            "  - name: cpu_hog_2\n    type: config_broken\n",
            "faults[3].name: duplicate fault name 'cpu_hog_2' (a fault left unnamed is called by its type)",
        ),
        ("name: squatter\n", "name: f1\n", "faults[0].name: 'f1' is reserved"),
        ("name: squatter\n", "name: Squatter\n", "faults[0].name: String should match pattern"),
    ],
    ids=[
        "positional",
        "unknown-name",
        "unknown-field",
        "not-an-expression",
        "duplicate",
        "clashes",
        "f1",
        "case",
    ],
)
def test_a_bad_reference_or_name_is_one_line_naming_file_and_field(tmp_path, old, new, said):
    assert old in SCENARIO
    assert error(tmp_path, SCENARIO.replace(old, new, 1)).startswith(said)


def test_a_partial_solution_is_checked_too(tmp_path):
    text = SCENARIO + "partial_solution: |\n  true\n  kill {{ hog.pid }}\n"
    assert error(tmp_path, text).startswith("partial_solution line 2: {{ hog.pid }}: no fault named 'hog'")


class Unfixable(Fault):
    """A fault type with no reference fix (a test's)."""

    type = "service_stopped"
    Params = FAULTS.get("service_stopped").Params
    records = ()

    def inject(self, shell, rng: random.Random) -> dict:
        return {}


def test_fix_of_a_type_without_a_reference_fix_is_refused_at_load_time(tmp_path):
    fault = "- name: down\n  type: service_stopped\n  params: {service: nginx}\n"
    text = scenario_yaml("named", difficulty="hard", faults=fault, solution="'{{ fix(down) }}'\n")
    assert str(load(tmp_path, text).solution) == "{{ fix(down) }}"  # the shipped type has one
    said = error(tmp_path, text, Registry("fault type", [Unfixable]))
    assert said == (
        "solution line 1: {{ fix(down) }}: fault type 'service_stopped' has no reference fix; "
        "write the repair out"
    )


class Undeclared(Unfixable):
    """Records a field it does not declare: a template could not have named it."""

    def inject(self, shell, rng: random.Random) -> dict:
        return {"pid": 7}

    def confirm(self, shell) -> Outcome:
        return Outcome(True, "in")


def test_a_fault_recording_an_undeclared_field_is_a_harness_error():
    registry = Registry("fault type", [Undeclared])
    params = Undeclared.Params(service="nginx")
    with pytest.raises(FixOSError, match=r"service_stopped recorded \['pid'\] but declares \[\]"):
        inject_all([("web", "service_stopped", params)], {"web": None}, seed=1, registry=registry)
    assert sorted(FAULTS.get("service_stopped").records) == []  # the shipped type declares what it records
