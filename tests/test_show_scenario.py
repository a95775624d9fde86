"""``fixos show-scenario ID`` (and ``fixos list ID``): a scenario with its named faults,
its solutions as written, and the steady state's gates it inherits, expanded."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT
from rich.console import Console

from fixos.cli.main import main
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.describe import first_sentence
from fixos.scenarios.steady import STEADY_STATE
from fixos.verifier import CHECKS


def shown(*argv: str) -> str:
    console = Console(width=400, color_system=None)
    with console.capture() as captured:
        assert main(list(argv), console) == 0
    return captured.get()


def test_show_scenario_expands_the_inherited_gates_and_names_the_faults():
    out = subprocess.run(
        [sys.executable, "-m", "fixos.cli", "show-scenario", "hard_3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "  squatter: port_squatter on web service=nginx, port=80, pid=922" in text
    assert "    fix(nginx_conf): The line put back" in text
    assert "  {{ fix(nginx_conf) }}" in text  # the solution as its author wrote it
    inherited = text.split("inherited gates")[1]
    for entry in STEADY_STATE:
        guards = first_sentence(CHECKS.get(entry["type"]).__doc__)
        assert guards, f"{entry['type']} has no docstring to say what it guards"
        assert f"  steady: {entry['name']} [{entry['type']}, on web]: {guards}\n" in inherited


def test_a_split_scenario_shows_each_hosts_gates_and_list_id_shows_the_same():
    text = shown("show-scenario", "net_hard_1")
    assert shown("list", "net_hard_1") == text
    scenario = load_catalog()["net_hard_1"]
    gates = [c for c in scenario.checks if c.name.startswith("steady:")]
    assert {c.host for c in gates} == {"web", "app", "db"}
    for gate in gates:
        assert f"  {gate.name} [{gate.type}, on {gate.host}]: " in text
    assert "blocker: firewall_blocks on db" in text and "fpm_down: service_stopped on app" in text
