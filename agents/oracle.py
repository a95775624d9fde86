"""Runs the scenario's reference repair: proves a scenario can be solved.

The script runs in one child bash with ``-euo pipefail``; an ERR trap of the
oracle's own says which line stopped it, so a scenario's author reads "solution
line 3 exited 1" (``SolutionFailed``, kept in the episode's record) rather than
only a low score.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from ..core.errors import SolutionFailed
from ..core.models import CommandResult, ScriptFailure
from ..shells.base import Shell
from .base import Task

MARK = "FIXOS-SOLUTION-FAILED"
_TRAP = f'trap \'printf "\\n{MARK} %s %s\\n" "$?" "$LINENO" >&2\' ERR\n'
"""one line ahead of the script: so the script's line N is bash's line N + 1."""
_MARKED = re.compile(rf"^{MARK} (\d+) (\d+)$", re.MULTILINE)
OUTPUT_LINES = 6
"""how many of the script's last output lines a failure keeps."""


def script_failure(script: str, result: CommandResult) -> ScriptFailure | None:
    """Where ``script`` stopped, from the run of it that gave ``result``; None when it succeeded."""
    if result.ok:
        return None
    marks = _MARKED.findall(result.output)
    output = _MARKED.sub("", result.output).rstrip("\n").splitlines()
    tail = "\n".join(output[-OUTPUT_LINES:])
    lines = script.splitlines()
    line: int | None = None
    if marks and not result.timed_out:
        number = int(marks[-1][1]) - 1
        line = number if 1 <= number <= len(lines) else None
    text = lines[line - 1] if line is not None else ""
    return ScriptFailure(exit_code=result.exit_code, line=line, text=text, output=tail)


def run_solution(shell: Shell, script: str) -> ScriptFailure | None:
    """Run ``script`` as the oracle does (one step, in a child bash, so an ``exit`` in it ends
    only the script); where it stopped, or None when it exited 0."""
    result = shell.run(f"bash -euo pipefail -c {shlex.quote(_TRAP + script)}")
    return script_failure(script, result)


class OracleAgent:
    name = "oracle"
    solution_key = "solution"
    wants_truth = True
    truth: dict[str, Any] | None = None
    """the ground truth of the episode's faults, handed over by ``make_agent``: its report"""

    def __init__(self, solution: str) -> None:
        self._solution = solution

    def report(self) -> dict[str, Any] | None:
        return self.truth

    def solve(self, task: Task, shell: Shell) -> None:
        if task.level != "repair":  # a report-only task: it reports the truth and touches nothing
            return
        failure = run_solution(shell, self._solution)
        if failure is not None:  # still judged on the host it left: the record says why it stopped
            raise SolutionFailed(failure)


class PartialAgent(OracleAgent):
    """Runs the scenario's partial repair: proves that partial credit is partial."""

    name = "partial"
    solution_key = "partial_solution"
    wants_truth = False  # a repair script, no report


def first_fixes_class(name: str) -> type[OracleAgent]:
    """``first-fixes:K``: an oracle that knows the fixes of the scenario's first K faults only
    (a world of K faults or fewer it solves): calibration's agent that tries, at a budget."""
    from ..core.errors import FixOSError

    k = name.partition(":")[2]
    if not k.isdigit() or not 1 <= int(k) <= 9:
        raise FixOSError(f"agent {name}: first-fixes:K takes K from 1 to 9")
    attrs = {"name": name, "solution_key": f"first_fixes:{k}", "wants_truth": False}  # it knows K fixes only
    return type(f"FirstFixes{k}", (OracleAgent,), attrs)
