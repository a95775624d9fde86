"""``fixos validate`` says why a scenario failed, on real containers: the solution line
that stopped the oracle under ``bash -e`` (with its exit code), and the check that failed
when a repair ran fine but repaired nothing."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import ROOT

pytestmark = pytest.mark.live

BROKEN = textwrap.dedent(
    """\
    id: wrong_solution
    title: nginx stopped, and a solution whose first line matches nothing
    difficulty: easy
    instruction: The website (http://localhost on this server) is down, please bring it back.
    hosts: [{name: web}]
    faults:
      - name: nginx_down
        type: service_stopped
        params: {service: nginx}
    checks:
      - name: nginx is running
        type: service_running
        params: {service: nginx}
    solution: |
      grep -q 'no such line' /etc/nginx/nginx.conf
      {{ fix(nginx_down) }}
    partial_solution: |
      echo "looks fine to me"
    """
)


def test_validate_names_the_failing_solution_line_and_the_failing_check(tmp_path: Path):
    (tmp_path / "wrong_solution.yaml").write_text(BROKEN)
    command = ["--scenario-dir", str(tmp_path), "validate", "--seeds", "1", "-j", "2"]
    run = subprocess.run(
        [sys.executable, "-m", "fixos.cli", *command, "--results", str(tmp_path / "results")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    out = run.stdout
    assert run.returncode == 1, out[-3000:] + run.stderr[-2000:]  # a failed validation, not an error
    oracle = out.split("oracle scored 0.00, wanted = 1.0\n")[1]
    line = "solution line 1 (`grep -q 'no such line' /etc/nginx/nginx.conf`) exited 1"
    assert oracle.startswith(f"      {line}\n"), oracle[:500]
    assert "      check failed: nginx is running (scored): " in oracle
    partial = out.split("partial scored 0.00, wanted in (0, 1)\n")[1]
    assert partial.startswith("      check failed: nginx is running (scored): "), partial[:500]
    assert "nop scored" not in out  # nop met its 0.0: nothing to say about it
