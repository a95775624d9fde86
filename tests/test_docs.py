"""The docs name what the code has: the tables of docs/scenarios.md list every scenario of
scenarios/ and every registered fault and check type (a new one without its row fails
here, not in a reader's hands), and README.md stays a short front page whose links lead
to pages that exist. The walk-throughs' code is run in test_docs_walkthrough.py."""

from __future__ import annotations

import re
from pathlib import Path

from fixos.injector import FAULTS
from fixos.scenarios.catalog import load_catalog
from fixos.verifier import CHECKS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SCENARIOS = (ROOT / "docs" / "scenarios.md").read_text(encoding="utf-8")
SCORING = (ROOT / "docs" / "scoring.md").read_text(encoding="utf-8")
PAGES = [
    "getting-started",
    "scenarios",
    "generated",
    "diagnosis",
    "writing-a-fault",
    "writing-a-check",
    "agents-and-shells",
    "scoring",
    "scaling-out",
    "rl-training",
    "results",
    "run-page",
    "ci",
    "harbor",
]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _rows(text: str, heading: str, *, pattern: str = r"\| `([a-z0-9_]+)`") -> set[str]:
    """The first-column ids (`like_this`) of the first table under ``heading``."""
    after = text[text.index(f"\n{heading}\n") :].split("\n")
    first = next(i for i, line in enumerate(after) if line.startswith("|"))
    table = []
    for line in after[first:]:
        if not line.startswith("|"):
            break
        table.append(line)
    return {m[1] for line in table if (m := re.match(pattern, line))}


def _anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_scenario_table_lists_every_scenario():
    listed = _rows(SCENARIOS, "## The catalogue", pattern=r"\| `([a-z0-9_]+)` \|")
    assert sorted(set(load_catalog()) - listed) == []
    assert sorted(listed - set(load_catalog())) == []  # no row for a scenario that is gone


def test_the_fault_table_lists_every_registered_fault_type():
    listed = _rows(SCENARIOS, "## Fault types (`injector/`)", pattern=r"\| `([a-z0-9_]+)` \|")
    assert sorted(set(FAULTS.names()) - listed) == []
    assert sorted(listed - set(FAULTS.names())) == []


def test_the_check_tables_list_every_registered_check_type():
    scenario_checks = _rows(SCENARIOS, "## Check types (`verifier/`)")
    gates = _rows(
        SCORING,
        "## The steady state every scenario inherits (`scenarios/steady.py`)",
        pattern=r"\|[^|]*\| `([a-z0-9_]+)` \|",
    )
    internal = {"services_stable"}  # the durability phase's own gate: no YAML entry names it
    assert sorted(set(CHECKS.names()) - scenario_checks - gates - internal) == []
    assert sorted(scenario_checks - set(CHECKS.names())) == []
    assert sorted(gates - set(CHECKS.names())) == []


def test_the_readme_is_a_short_front_page():
    assert len(README.splitlines()) <= 250
    for needed in ("make bench", "make test", "## A first run", "## Where next"):
        assert needed in README


def test_notes_are_decisions_and_the_history_is_the_changelog():
    notes = (ROOT / "NOTES.md").read_text(encoding="utf-8")
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert len(notes.splitlines()) <= 100
    assert "Session" not in notes  # a log of sessions belongs to the issues and git, not here
    assert changelog.startswith("# Changelog") and "## Unreleased" in changelog


def test_the_readme_links_every_docs_page_and_each_exists():
    linked = {target for target, _ in LINK.findall(README) if target.startswith("docs/")}
    assert sorted(f"docs/{page}.md" for page in PAGES) == sorted(linked)
    assert [target for target in linked if not (ROOT / target).is_file()] == []


def test_the_readme_counts_are_the_catalogues():
    scenarios, faults = map(int, re.search(r"(\d+) scenarios over (\d+) fault types", README).groups())
    assert (scenarios, faults) == (len(load_catalog()), len(FAULTS.names()))


def test_links_between_docs_pages_lead_somewhere():
    broken = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for target, anchor in LINK.findall(page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://")):
                continue
            path = (page.parent / target).resolve()
            if not path.is_file():
                broken.append(f"{page.name}: {target}")
            elif anchor and path.suffix == ".md":
                headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
                if anchor[1:] not in {_anchor(h) for h in headings}:
                    broken.append(f"{page.name}: {target}{anchor}")
    assert broken == []
