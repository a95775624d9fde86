"""Scenario files load, and every kind of bad file fails with one line naming file and field."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fixos.cli.main import main
from fixos.core.errors import FixOSError, ScenarioError
from fixos.injector import FAULTS
from fixos.scenarios.catalog import load_catalog, select
from fixos.scenarios.schema import load_scenario
from fixos.verifier import CHECKS

GOOD = textwrap.dedent(
    """\
    id: broken
    title: a test scenario
    difficulty: easy
    instruction: The website is down, please fix it.
    hosts: [{name: web}]
    faults:
      - type: service_stopped
        params: {service: nginx}
    checks:
      - name: nginx is running
        type: service_running
        params: {service: nginx}
    solution: service nginx start
    """
)


def write(tmp_path: Path, text: str, name: str = "broken.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load(path: Path):
    return load_scenario(path, faults=FAULTS, checks=CHECKS)


def test_bundled_scenarios_load():
    catalog = load_catalog()
    assert "easy_1" in catalog
    easy_1 = catalog["easy_1"]
    assert easy_1.fault_types == ["service_stopped"]
    assert any(not c.scored for c in easy_1.checks), "easy_1 needs an anti-bypass gate"


def test_good_file_loads_with_typed_params(tmp_path):
    scenario = load(write(tmp_path, GOOD))
    assert scenario.faults[0].params.service == "nginx"
    assert scenario.limits.max_steps == 30


@pytest.mark.parametrize(
    ("old", "new", "field", "words"),
    [
        ("service: nginx}\n", "service: ngnix}\n", "faults[0].params.service", ["ngnix", "nginx"]),
        (
            "service: nginx}\n",
            "service: nginx, sevrice: x}\n",
            "faults[0].params.sevrice",
            ["unknown"],
        ),
        ("type: service_stopped", "type: service_stoped", "faults[0].type", ["service_stopped"]),
        ("difficulty: easy", "difficulty: trivial", "difficulty", ["trivial"]),
        ("title: a test scenario\n", "", "title", ["required"]),
        (
            "solution: service nginx start",
            "solution: service nginx start\nsolutoin: x",
            "solutoin",
            ["unknown"],
        ),
        (
            "- type: service_stopped",
            "- type: service_stopped\n    host: db",
            "faults[0].host",
            ["db"],
        ),
        ("id: broken", "id: other", "id", ["broken"]),
    ],
)
def test_bad_field_is_named(tmp_path, old, new, field, words):
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ScenarioError) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: {field}: "), message
    for word in words:
        assert word in message


def test_invalid_yaml_names_the_line(tmp_path):
    path = write(tmp_path, GOOD + "checks: [unclosed\n")
    with pytest.raises(ScenarioError, match=r"broken\.yaml: line \d+: invalid YAML"):
        load(path)


def test_not_a_mapping(tmp_path):
    with pytest.raises(ScenarioError, match="expected a mapping"):
        load(write(tmp_path, "- just\n- a list\n"))


def test_cli_reports_bad_file_in_one_line(tmp_path, capsys):
    write(tmp_path, GOOD.replace("service: nginx}", "service: ngnix}", 1))
    code = main(["--scenario-dir", str(tmp_path), "list"])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert len(err.splitlines()) == 1, err
    assert "broken.yaml: faults[0].params.service" in err


def test_select_by_id_and_difficulty():
    catalog = load_catalog()
    assert [s.id for s in select(catalog, ["easy_1"])] == ["easy_1"]
    assert all(s.difficulty == "easy" for s in select(catalog, ["easy"]))
    with pytest.raises(FixOSError, match="no scenario 'nope'"):
        select(catalog, ["nope"])
