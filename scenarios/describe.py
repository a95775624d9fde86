"""A scenario as its author reads it: hosts, named faults, the solutions as templates,
its own checks, then the steady state's gates it inherits, each with what it guards."""

from __future__ import annotations

import re
from typing import Any

from ..core.registry import Registry
from ..injector import FAULTS, Fault
from ..verifier import CHECKS
from .schema import CheckSpec, Scenario
from .steady import STEADY_PREFIX


def first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring, on one line ('' when there is none)."""
    text = " ".join((doc or "").split())
    match = re.match(r"(.+?[.:;])(\s|$)", text)
    return (match.group(1) if match else text).rstrip(".:;")


def _params(params: Any) -> str:
    if params is None:
        return ""
    values = params.model_dump(exclude_unset=True) if hasattr(params, "model_dump") else params
    return " " + ", ".join(f"{k}={v}" for k, v in values.items()) if values else ""


def _block(title: str, text: str) -> list[str]:
    return [f"{title}:", *(f"  {line}" for line in text.rstrip("\n").splitlines()), ""]


def _check_line(check: CheckSpec, scenario: Scenario) -> str:
    kind = "scored" if check.scored else "gate"
    return f"  {check.name} [{check.type}, {kind}, on {scenario.host_of(check)}]{_params(check.params)}"


def describe(scenario: Scenario, *, faults: Registry[Fault] = FAULTS, checks: Registry[Any] = CHECKS) -> str:
    """The scenario as plain text (no markup): what ``fixos show-scenario ID`` prints."""
    lines = [f"{scenario.id} ({scenario.difficulty}): {scenario.title}", ""]
    lines.append("hosts:")
    for host in scenario.hosts:
        login = ", login" if host.name == scenario.login_host else ""
        decoys = f"; decoys: {', '.join(host.decoys)}" if host.decoys else ""
        lines.append(f"  {host.name} (role {host.role}{login}): runs {', '.join(host.services)}{decoys}")
    lines += ["", *_block("instruction", scenario.instruction)]
    lines.append("faults (a solution names them: {{ NAME.field }}, {{ fix(NAME) }}):")
    for fault in scenario.faults:
        cls = faults.get(fault.type)
        lines.append(f"  {fault.name}: {fault.type} on {scenario.host_of(fault)}{_params(fault.params)}")
        lines.append(f"    records: {', '.join(cls.records) or 'nothing'}")
        if cls.has_fix():
            what = first_sentence(cls.fix.__doc__) or "the fault type's reference repair"
            lines.append(f"    fix({fault.name}): {what}")
        else:
            lines.append("    no reference fix: a solution writes the repair out")
    lines.append("")
    lines += _block("solution", scenario.solution)
    if scenario.partial_solution:
        lines += _block("partial_solution", scenario.partial_solution)
    own = [c for c in scenario.checks if not c.name.startswith(STEADY_PREFIX)]
    inherited = [c for c in scenario.checks if c.name.startswith(STEADY_PREFIX)]
    lines.append("checks:")
    lines += [_check_line(c, scenario) for c in own]
    lines += ["", "inherited gates (the steady state every scenario gets; failing one zeroes the reward):"]
    for check in inherited:
        guards = first_sentence(checks.get(check.type).__doc__)
        lines.append(f"  {check.name} [{check.type}, on {scenario.host_of(check)}]: {guards}")
    limits = scenario.limits
    budget = f"{limits.max_steps} steps, {limits.wall_seconds:g} s"
    lines += ["", f"limits: {budget}, {limits.command_timeout:g} s a command"]
    return "\n".join(lines)
