"""Property-based fuzzing of the scenario loader: whatever a file holds (random YAML,
random text or bytes, the real scenarios mutated), loading it either gives a Scenario or
raises a one-line FixOSError naming the file and the field, never any other exception."""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixos.core.errors import FixOSError, ScenarioError
from fixos.injector import FAULTS
from fixos.scenarios.schema import SCENARIO_DIR, Scenario, load_scenario
from fixos.verifier import CHECKS

REAL = {path.name: path.read_text() for path in sorted(SCENARIO_DIR.glob("*.yaml"))}
FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
LONGEST_MESSAGE = 1200
"""a message quotes at most a few values of <= 200 characters each, whatever the file holds."""

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | st.text(max_size=30)
    | st.sampled_from(["easy", "web", "nginx", "mariadb", "file_mode", "service_stopped", "x" * 5000])
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(max_size=12) | st.sampled_from(list(Scenario.model_fields)), inner, max_size=5
        )
    ),
    max_leaves=20,
)


def outcome(directory: Path, name: str, content: bytes) -> Scenario | ScenarioError:
    """Load ``content`` as the file ``name``; any exception but FixOSError fails the test."""
    path = directory / name
    path.write_bytes(content)
    try:
        return load_scenario(path, faults=FAULTS, checks=CHECKS)
    except FixOSError as exc:
        message = str(exc)
        assert isinstance(exc, ScenarioError), f"{type(exc).__name__}: {message}"
        assert message.startswith(f"{path}: "), message
        assert exc.field, f"no field named: {message}"
        assert "\n" not in message, message
        assert len(message) <= LONGEST_MESSAGE, message[:300]
        return exc


def paths(data: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside nested dicts and lists."""
    yield prefix
    if isinstance(data, dict):
        for key, value in data.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            yield from paths(value, (*prefix, i))


def mutate(data: Any, path: tuple[Any, ...], how: str, value: Any) -> Any:
    data = copy.deepcopy(data)
    if not path:
        return value
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if how == "replace":
        parent[last] = value
    elif how == "delete":
        del parent[last]
    elif how == "add" and isinstance(parent[last], dict):
        parent[last]["unexpected"] = value
    elif how == "add" and isinstance(parent[last], list):
        parent[last].append(value)
    return data


@FUZZ
@given(document=values)
def test_random_yaml_documents(document: Any) -> None:
    with tempfile.TemporaryDirectory() as directory:
        outcome(Path(directory), "fuzz.yaml", yaml.safe_dump(document).encode())


@FUZZ
@given(
    content=st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=300)
    | st.binary(max_size=300)
)
def test_random_text_and_bytes(content: str | bytes) -> None:
    raw = content.encode() if isinstance(content, str) else content
    with tempfile.TemporaryDirectory() as directory:
        outcome(Path(directory), "fuzz.yaml", raw)


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(REAL)))
def test_mutated_real_scenarios(data: st.DataObject, name: str) -> None:
    original = yaml.safe_load(REAL[name])
    path = data.draw(st.sampled_from(list(paths(original))), label="path")
    how = data.draw(st.sampled_from(["replace", "delete", "add"]), label="how")
    if how == "delete" and not path:
        how = "replace"
    mutated = mutate(original, path, how, data.draw(values, label="value"))
    with tempfile.TemporaryDirectory() as directory:
        outcome(Path(directory), name, yaml.safe_dump(mutated, sort_keys=False).encode())


@FUZZ
@given(data=st.data(), name=st.sampled_from(sorted(REAL)))
def test_real_scenarios_mutated_as_text(data: st.DataObject, name: str) -> None:
    raw = REAL[name].encode()
    start = data.draw(st.integers(0, len(raw)), label="start")
    end = data.draw(st.integers(start, min(len(raw), start + 40)), label="end")
    inserted = data.draw(
        st.binary(max_size=8)
        | st.sampled_from([b"&a ", b"*a", b"[", b"{", b": ", b"\n  ", b"- ", b"!!int ", b"\t"]),
        label="inserted",
    )
    with tempfile.TemporaryDirectory() as directory:
        outcome(Path(directory), name, raw[:start] + inserted + raw[end:])


def test_the_real_scenarios_load_unmutated() -> None:
    """The mutations above start from files that load: a failure there is the mutation's."""
    with tempfile.TemporaryDirectory() as directory:
        for name, text in REAL.items():
            assert isinstance(outcome(Path(directory), name, text.encode()), Scenario), name


def test_a_key_with_a_line_break_is_named_on_one_line() -> None:
    """Found by ``test_mutated_real_scenarios``: ``limits: {"\\n": null}`` in fd_1."""
    original = yaml.safe_load(REAL["fd_1.yaml"])
    mutated = mutate(original, ("limits",), "replace", {"\n": None})
    with tempfile.TemporaryDirectory() as directory:
        found = outcome(Path(directory), "fd_1.yaml", yaml.safe_dump(mutated, sort_keys=False).encode())
    assert isinstance(found, ScenarioError) and found.field == "limits['\\n']", found
