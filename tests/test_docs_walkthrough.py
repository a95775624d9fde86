"""The walk-throughs in docs/ are run, not read: their code blocks are extracted from the
page and executed, so a page cannot drift from the code it teaches.

docs/writing-a-fault.md defines and registers a fault type; on a live host it is injected,
confirmed, repaired by its own ``fix``, and a check from outside sees the site healthy.
docs/writing-a-check.md defines and registers a check type, judged against a FakeShell;
docs/agents-and-shells.md's custom agent restarts what a FakeShell says is down."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fixos.injector import FAULTS
from fixos.injector.base import fault_rng
from fixos.verifier import CHECKS

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks(page: str, language: str) -> list[str]:
    """The ``language`` code blocks of ``docs/<page>``, in order."""
    text = (DOCS / page).read_text(encoding="utf-8")
    return [body for lang, body in BLOCK.findall(text) if lang == language]


def run_blocks(page: str) -> dict[str, Any]:
    """Every python block of ``page`` run in order in one namespace, as a reader would paste them."""
    return run_blocks_of(page)


def run_blocks_of(page: str, *, first: int | None = None) -> dict[str, Any]:
    """The python blocks of ``page`` (only the ``first`` ones, if given) run in one namespace."""
    namespace: dict[str, Any] = {"__name__": f"docs_{Path(page).stem.replace('-', '_')}"}
    found = blocks(page, "python")[:first]
    assert found, f"docs/{page} has no python block"
    for number, code in enumerate(found, 1):
        exec(compile(code, f"docs/{page} python block {number}", "exec"), namespace)
    return namespace


@pytest.fixture
def registries(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """FAULTS and CHECKS as they were once the test ends: a page's example type registers
    itself, and must not stay among FixOS's own (every registered type is tested and listed)."""
    monkeypatch.setattr(FAULTS, "_classes", dict(FAULTS._classes))
    monkeypatch.setattr(CHECKS, "_classes", dict(CHECKS._classes))
    yield


def test_block_extraction_sees_every_block():
    assert len(blocks("writing-a-fault.md", "python")) >= 3
    assert len(blocks("writing-a-fault.md", "yaml")) == 1


# ---- docs/writing-a-fault.md ------------------------------------------------------------


def test_the_fault_page_registers_its_fault_type(registries):
    page = run_blocks("writing-a-fault.md")
    cls = FAULTS.get("index_moved")
    assert cls is page["IndexMoved"]
    fault = cls(cls.Params.model_validate({}))
    assert cls.records == ("backup",)
    assert cls.has_fix()
    assert fault.fix({"backup": "/var/www/shop/index.html~"}) == (
        "mv -- '/var/www/shop/index.html~' /var/www/shop/index.html"
    )
    with pytest.raises(ValueError, match="web_rooot"):
        cls.Params.model_validate({"web_rooot": "/tmp"})  # extra="forbid": a misspelt key fails


def test_the_fault_page_scenario_loads_with_its_fault(registries):
    from fixos.core.errors import ScenarioError
    from fixos.scenarios.schema import parse_scenario

    run_blocks("writing-a-fault.md")
    (text,) = blocks("writing-a-fault.md", "yaml")
    scenario = parse_scenario(yaml.safe_load(text), "index_1.yaml", faults=FAULTS, checks=CHECKS)
    assert [f.type for f in scenario.faults] == ["index_moved"]
    assert any(c.name.startswith("steady:") for c in scenario.checks)  # inherits the gates
    # the error the page quotes for a field the type does not record is the loader's
    page = (DOCS / "writing-a-fault.md").read_text(encoding="utf-8")
    wrong, said = re.search(
        r"`(\{\{ moved\.\w+ \}\})` fails\s+at\s+load\s+time\s+with\s+`([^`]+)`", page
    ).groups()
    broken = yaml.safe_load(text.replace("{{ moved.backup }}", wrong))
    with pytest.raises(ScenarioError) as error:
        parse_scenario(broken, "index_1.yaml", faults=FAULTS, checks=CHECKS)
    assert " ".join(said.split()) in str(error.value)


@pytest.mark.live
def test_the_fault_page_breaks_and_repairs_a_live_host(registries, live_host, probe):
    page = run_blocks("writing-a-fault.md")
    cls = FAULTS.get("index_moved")
    page_check = CHECKS.get("http_page")
    check = page_check(page_check.Params.model_validate({"path": "/", "same_as_healthy": True}))
    healthy = check.snapshot(probe)
    assert check.evaluate(probe, healthy).passed

    with live_host.shell(default_timeout=30) as shell:
        # broken as the page says: confirmed, and the front page fails from outside
        fault = cls(cls.Params.model_validate({}))
        seeded = fault.inject(shell, fault_rng(1, 0, "index_moved"))
        assert sorted(seeded) == sorted(cls.records)  # what inject_all demands of every fault
        assert fault.confirm(shell).passed
        broken = check.evaluate(probe, healthy)
        assert not broken.passed and "403" in broken.detail, broken.detail
        fault.revert(shell)
        assert check.evaluate(probe, healthy).passed

        # the page's own try-it: inject, confirm, fix
        assert page["try_index_moved"](shell, seed=1) == seeded  # same seed, same world
    after = check.evaluate(probe, healthy)
    assert after.passed, after.detail


# ---- docs/writing-a-check.md ------------------------------------------------------------


def test_the_check_page_registers_and_judges_its_check(registries):
    page = run_blocks("writing-a-check.md")
    assert CHECKS.get("line_kept") is page["LineKept"]
    page["try_line_kept"]()
    (text,) = blocks("writing-a-check.md", "yaml")
    (entry,) = yaml.safe_load(text)["checks"]
    CHECKS.get(entry["type"]).Params.model_validate(entry["params"])


# ---- docs/agents-and-shells.md ----------------------------------------------------------


def test_the_agent_page_custom_agent_restarts_what_is_down():
    from fixos.agents import Task
    from fixos.shells import FakeShell

    page = run_blocks_of("agents-and-shells.md", first=1)
    agent = page["RestartWhatIsDown"]()
    shell = FakeShell(lambda command: ("stopped", 3) if command == "service nginx status" else "running")
    agent.solve(
        Task(scenario="easy_1", instruction="the site is down", max_steps=20, wall_seconds=300), shell
    )
    assert [c for c in shell.commands if "start" in c] == ["service nginx start"]
