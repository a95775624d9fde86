"""All scenarios under scenarios/, validated against the fault and check registries."""

from __future__ import annotations

import re
from pathlib import Path

from ..core.errors import FixOSError, ScenarioError
from ..injector import FAULTS
from ..verifier import CHECKS
from .schema import SCENARIO_DIR, Scenario, load_scenario

DIFFICULTIES = ("easy", "medium", "hard")


class Catalog(dict[str, Scenario]):
    """The hand-written scenarios (all, or those a command named: ``load_catalog(only=)``), by
    id; a generated id (``gen:LEVEL:N``) is made when asked for, and never listed: iterating
    gives the hand-written ones only."""

    def __missing__(self, key: str) -> Scenario:
        from .worlds import generated, is_generated

        if not is_generated(key):
            raise KeyError(key)
        return generated(key)

    def __contains__(self, key: object) -> bool:
        from .worlds import is_generated

        return dict.__contains__(self, key) or is_generated(key)

    def get(self, key: str, default: Scenario | None = None) -> Scenario | None:  # type: ignore[override]
        try:
            return self[key]
        except KeyError:
            return default


def load_catalog(directory: Path = SCENARIO_DIR, *, only: list[str] | None = None) -> Catalog:
    """Every ``*.yaml`` in ``directory``; a directory that is missing or holds none is an error,
    never an empty catalog (a mistyped --scenario-dir would otherwise look like no scenarios).

    ``only``: the words of a command's ``--scenarios``. When each is a plain id with a file of
    its name (``easy_1`` -> ``easy_1.yaml``), only those files are read: a command's start
    waits for nothing else (the 51 files: ~40 ms). Any other word (a difficulty, a generated
    id, an id with no file) reads them all; a file holding another id than its name is refused
    either way."""
    named = _named_files(directory, only)
    if named is not None:
        return named
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
    return Catalog(sorted(scenarios.items(), key=lambda kv: (DIFFICULTIES.index(kv[1].difficulty), kv[0])))


def _named_files(directory: Path, words: list[str] | None) -> Catalog | None:
    ids = [part for word in words or [] for part in word.split(",")]
    if not ids or not all(ID.match(i) and i not in DIFFICULTIES for i in ids):
        return None
    paths = [directory / f"{i}.yaml" for i in ids]
    if not all(p.is_file() for p in paths):
        return None  # the whole catalogue's error: no scenario of that id
    # load_scenario refuses a file whose id is not its name: a named file holds that id
    return Catalog((s.id, s) for s in (load_scenario(p, faults=FAULTS, checks=CHECKS) for p in paths))


ID = re.compile(r"^[a-z0-9_]+$")
"""a word that can only be a hand-written scenario's id (scenarios.schema's pattern)."""
RANGE = re.compile(r"^gen:([0-9]+):([0-9]+)-([0-9]+)$")


def _ranges(parts: list[str]) -> list[str]:
    """``gen:LEVEL:A-B`` spelled out as the ids ``gen:LEVEL:A`` ... ``gen:LEVEL:B``."""
    out = []
    for part in parts:
        found = RANGE.match(part)
        if found is None:
            out.append(part)
            continue
        level, first, last = (int(g) for g in found.groups())
        if not 1 <= first <= last or last - first >= 10_000:
            raise FixOSError(f"{part!r}: a range of generated ids is gen:LEVEL:A-B, 1 <= A <= B < A + 10000")
        out += [f"gen:{level}:{n}" for n in range(first, last + 1)]
    return out


def select(catalog: dict[str, Scenario], wanted: list[str] | None) -> list[Scenario]:
    """Scenarios by id or by difficulty (``easy``, ``medium``, ``hard``), generated worlds by
    id or range (``gen:3:7``, ``gen:3:1-40``); the catalogue when none given."""
    if not wanted:
        return list(catalog.values())
    chosen: list[Scenario] = []
    for word in wanted:
        for part in _ranges(word.split(",")):
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
