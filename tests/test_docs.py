"""README.md's tables name every scenario of scenarios/ and every registered fault type:
a new one without its row fails here, not in a reader's hands."""

from __future__ import annotations

import re
from pathlib import Path

from fixos.injector import FAULTS
from fixos.scenarios.catalog import load_catalog

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _rows(heading: str) -> set[str]:
    """The first-column ids (`like_this`) of the first table under ``heading``."""
    after = README[README.index(f"\n{heading}\n") :].split("\n")
    first = next(i for i, line in enumerate(after) if line.startswith("|"))
    table = []
    for line in after[first:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return {m[1] for line in table if (m := re.match(r"\| `([a-z0-9_]+)` \|", line))}


def test_the_scenario_table_lists_every_scenario():
    listed = _rows("## Scenarios")
    assert sorted(set(load_catalog()) - listed) == []
    assert sorted(listed - set(load_catalog())) == []  # no row for a scenario that is gone


def test_the_fault_table_lists_every_registered_fault_type():
    listed = _rows("### Fault types (`injector/`)")
    assert sorted(set(FAULTS.names()) - listed) == []
    assert sorted(listed - set(FAULTS.names())) == []
