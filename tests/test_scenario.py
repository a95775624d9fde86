"""Scenario files load, and every kind of bad file fails with one line naming file and field."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from helpers import scenario_yaml

from fixos.cli.main import main
from fixos.core.errors import FixOSError, ScenarioError
from fixos.injector import FAULTS
from fixos.scenarios import reading
from fixos.scenarios.catalog import load_catalog, select
from fixos.scenarios.reading import MAX_BYTES
from fixos.scenarios.schema import load_scenario
from fixos.verifier import CHECKS

GOOD = scenario_yaml(
    "broken",
    faults="""\
        - type: service_stopped
          params: {service: nginx}
        """,
    solution="service nginx start\n",
)


def write(tmp_path: Path, text: str, name: str = "broken.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load(path: Path):
    return load_scenario(path, faults=FAULTS, checks=CHECKS)


@pytest.fixture(params=reading.LOADERS, ids=lambda cls: cls.__name__)
def loader(request, monkeypatch):
    """Each loader ``read_yaml`` may use (libyaml's where PyYAML has it, and the pure one)."""
    monkeypatch.setattr(reading, "LOADERS", [request.param])
    return request.param


def test_both_loaders_read_the_catalogue_alike(monkeypatch):
    assert len(reading.LOADERS) == 2, "PyYAML without libyaml here: only the pure loader is tested"
    read = []
    for cls in reading.LOADERS:
        monkeypatch.setattr(reading, "LOADERS", [cls])
        read.append(load_catalog())
    assert read[0] == read[1] and len(read[0]) > 40


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


def test_invalid_yaml_names_the_line(tmp_path, loader):
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
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert "broken.yaml: faults[0].params.service" in err


def test_select_by_id_and_difficulty():
    catalog = load_catalog()
    assert [s.id for s in select(catalog, ["easy_1"])] == ["easy_1"]
    assert all(s.difficulty == "easy" for s in select(catalog, ["easy"]))
    with pytest.raises(FixOSError, match="no scenario 'nope'"):
        select(catalog, ["nope"])


def test_a_command_naming_ids_reads_only_their_files(tmp_path):
    write(tmp_path, GOOD)
    write(tmp_path, GOOD.replace("id: broken", "id: other", 1), "other.yaml")
    write(tmp_path, "- not a scenario\n", "zzz_draft.yaml")  # read only by a whole-catalogue load
    assert list(load_catalog(tmp_path, only=["broken"])) == ["broken"]
    assert list(load_catalog(tmp_path, only=["other,broken"])) == ["other", "broken"]
    for words in (["easy"], ["broken", "gen:1:1"], ["missing"], None):
        with pytest.raises(ScenarioError, match=r"zzz_draft\.yaml: top level"):
            load_catalog(tmp_path, only=words)
    # a file named for one id that holds another is refused, as in the whole catalogue
    write(tmp_path, GOOD, "third.yaml")
    with pytest.raises(ScenarioError, match=r"third\.yaml: id: must match the file name"):
        load_catalog(tmp_path, only=["third"])


def billion_laughs(levels: int = 9) -> str:
    """1 KB of YAML that expands to 10**levels strings."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join([*lines, f"id: *a{levels}", ""])


def test_billion_laughs_is_refused_fast_and_small(tmp_path, loader):
    path = write(tmp_path, GOOD + billion_laughs())
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ScenarioError, match=r"broken\.yaml: line \d+: invalid YAML: more than \d+ nodes"):
            load(path)
        took = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert took < 1.0 and peak < 100 * 2**20, (took, peak)


def test_aliases_that_stay_small_still_load(tmp_path, loader):
    assert load(write(tmp_path, GOOD + "tags: [&t shop, *t, *t]\n")).tags == ["shop"] * 3


@pytest.mark.parametrize(
    "text, words",
    [
        ("id: &a [*a]\n", "refers to a node containing it"),
        ("id: " + "[" * 100 + "]" * 100 + "\n", "nested more than 64 levels"),
        ("id: " + "[" * 5000 + "]" * 5000 + "\n", "nest"),  # libyaml stops at 1000 itself
        ("id: !!int seven\n", "YAML: invalid value"),
        ("id: !!int\n", "YAML: invalid value"),  # PyYAML's constructors raise IndexError,
        ("id: !!bool ''\n", "YAML: invalid value"),  # KeyError and AttributeError too
        ("id: !!timestamp x\n", "YAML: invalid value"),
        ("id: 2001-13-01\n", "YAML: invalid value"),
        ("id: easy\x00\n", "line 1: invalid YAML"),
    ],
)
def test_hostile_yaml_is_one_line_naming_the_file(tmp_path, loader, text, words):
    with pytest.raises(ScenarioError, match=r"broken\.yaml") as caught:
        load(write(tmp_path, text))
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_non_utf8_file_is_one_line_naming_file_and_line(tmp_path, capsys):
    (tmp_path / "broken.yaml").write_bytes(GOOD.encode() + b"tags: [caf\xe9]\n")
    assert main(["--scenario-dir", str(tmp_path), "list"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"fixos: {tmp_path / 'broken.yaml'}: line 14: not UTF-8 text (byte 0xe9)"


def test_a_file_over_the_size_cap_is_refused_unparsed(tmp_path):
    path = write(tmp_path, GOOD + "# " + "x" * MAX_BYTES + "\n")
    started = time.perf_counter()
    with pytest.raises(ScenarioError, match=r"broken\.yaml: size: larger than 1 MiB"):
        load(path)
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("field", ["title", "id", "hosts[0].name", "checks[0].host", "checks[0].type"])
def test_a_huge_bad_value_is_shortened_in_the_message(tmp_path, field):
    huge = "Q" * 1_000_000
    text = {
        "title": GOOD.replace("title: a test scenario", f"title: [{huge}]"),
        "id": GOOD.replace("id: broken", f"id: {huge}"),
        "hosts[0].name": GOOD.replace("{name: web}", f"{{name: {huge}}}"),
        "checks[0].host": GOOD.replace("type: service_running", f"type: service_running\n    host: {huge}"),
        "checks[0].type": GOOD.replace("type: service_running", f"type: {huge}"),
    }[field]
    with pytest.raises(ScenarioError) as caught:
        load(write(tmp_path, text))
    message = str(caught.value)
    assert field in message and "QQQQ" in message, message[:300]
    longest = max(len(run) for run in message.split() if "Q" in run)
    assert longest <= 200 and len(message) < 1000, message[:300]


def test_a_missing_or_empty_scenario_dir_is_an_error(tmp_path, capsys):
    missing = tmp_path / "nonexistent"
    assert main(["--scenario-dir", str(missing), "list"]) == 2
    assert capsys.readouterr().err.strip() == f"fixos: {missing}: --scenario-dir: does not exist"
    with pytest.raises(ScenarioError, match="holds no scenario files"):
        load_catalog(tmp_path)
