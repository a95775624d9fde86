"""Off a terminal (pipes, CI logs) FixOS's lines are not cut at 80 columns."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

from rich.table import Table

from fixos.scenarios.catalog import load_catalog
from fixos.views.console import NON_TERMINAL_WIDTH, make_console


def test_a_long_line_stays_one_line(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    line = "easy_1-s1-oracle: 1.00 · reset 0.91s · 3 step(s) · " + "detail " * 40
    make_console(file=out).print(line, highlight=False)
    assert out.getvalue() == line + "\n"


def test_a_table_row_stays_one_line(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    table = Table("id", "title")
    table.add_row("easy_2", "mysql stopped, with a hint in the logs " * 3)
    make_console(file=out).print(table)
    [row] = [line for line in out.getvalue().splitlines() if "easy_2" in line]
    assert row.count("mysql stopped") == 3
    assert max(len(line) for line in out.getvalue().splitlines()) <= NON_TERMINAL_WIDTH


def test_columns_is_honoured(monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    out = io.StringIO()
    table = Table("id", "title")
    table.add_row("easy_2", "mysql stopped, with a hint in the logs " * 2)
    console = make_console(file=out)
    console.print(table)
    assert console.width == 50
    assert max(len(line) for line in out.getvalue().splitlines()) <= 50


def test_fixos_list_through_a_pipe_keeps_a_scenario_a_line():
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")}
    listed = subprocess.run(
        [sys.executable, "-m", "fixos.cli", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^│ (\S+)\s+│.*│ (.+?)\s+│$", listed.stdout, re.M)}
    catalog = load_catalog()
    assert {scenario_id: catalog[scenario_id].title for scenario_id in catalog} == rows
