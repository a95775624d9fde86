"""Reference solutions are templates over the scenario's faults, named.

``{{ squatter.pid }}`` is the ``pid`` the fault named ``squatter`` recorded,
shell-quoted; dotted paths reach into lists and mappings
(``{{ hogs.processes.0.pid }}``). ``{{ fix(broken_conf) }}`` is that fault
type's reference repair (``Fault.fix``), so a repair written once in the fault
type serves every scenario. The first part of a path must be a field the fault
type declares (``Fault.records``): a template is checked when the scenario
loads (``check_template``), so an unknown name or field never waits for a run.

A fault without a ``name`` is called by its type, or ``TYPE_N`` when the
scenario has several faults of that type (N counts them from 1 in file order).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.errors import InvalidEpisode
from ..core.models import InjectedFault
from ..core.registry import Registry
from ..core.words import Verbatim, word
from ..injector import FAULTS, Fault

__all__ = ["Template", "Verbatim", "check_template", "default_names", "render"]

EXPRESSION = re.compile(r"\{\{\s*([A-Za-z_][^{}]*?)\s*\}\}")
"""``{{ ... }}`` starting with a letter: a template expression (``{{.State}}`` stays shell)."""
_FIELD = re.compile(r"([a-z][a-z0-9_]*)\.(\w+)((?:\.\w+)*)")
_FIX = re.compile(r"fix\(\s*([a-z][a-z0-9_]*)\s*\)")
POSITIONAL = re.compile(r"f\d+")
"""how faults were once referred to, by position (``{{ f0.pid }}``): no name may look like it."""


class Template(str):
    """A solution script bound to its scenario's fault names, in the faults' order."""

    names: tuple[str, ...] = ()

    def __new__(cls, text: str, names: Sequence[str]) -> Template:
        self = super().__new__(cls, text)
        self.names = tuple(names)
        return self

    def __reduce__(self) -> tuple[Any, ...]:  # pickled (ray) with its names
        return (Template, (str(self), self.names))


def default_names(types: Sequence[str], given: Sequence[str | None] | None = None) -> list[str]:
    """Each fault's name: the one given, else its type, or ``TYPE_N`` when ``types`` holds
    that type more than once (N: its place among them, from 1)."""
    given = given or [None] * len(types)
    names = []
    for i, (fault_type, name) in enumerate(zip(types, given, strict=True)):
        if name is None:
            repeated = types.count(fault_type) > 1
            name = f"{fault_type}_{types[: i + 1].count(fault_type)}" if repeated else fault_type
        names.append(name)
    return names


def _problem(expression: str, faults: Mapping[str, type[Fault]], order: list[str]) -> str | None:
    """What is wrong with one expression, or None."""
    shown = f"{{{{ {expression} }}}}"
    fix = _FIX.fullmatch(expression)
    field = _FIELD.fullmatch(expression)
    name = fix.group(1) if fix else field.group(1) if field else None
    if name is None:
        return f"{shown}: not a template expression; write {{{{ NAME.field }}}} or {{{{ fix(NAME) }}}}"
    if name not in faults:
        if POSITIONAL.fullmatch(name) and field:
            index = int(name[1:])
            hint = f" (faults[{index}] is {order[index]!r})" if index < len(order) else ""
            example = order[index] if index < len(order) else "NAME"
            return (
                f"{shown} refers to a fault by position; name it instead: "
                f"{{{{ {example}.{field.group(2)}{field.group(3)} }}}}{hint}"
            )
        return f"{shown}: no fault named {name!r} (faults: {', '.join(order)})"
    cls = faults[name]
    if fix:
        if not cls.has_fix():
            return f"{shown}: fault type {cls.type!r} has no reference fix; write the repair out"
        return None
    assert field is not None
    if field.group(2) not in cls.records:
        fields = ", ".join(cls.records) or "none"
        return f"{shown}: fault type {cls.type!r} records no field {field.group(2)!r} (fields: {fields})"
    return None


def check_template(script: str, faults: Sequence[tuple[str, type[Fault]]]) -> tuple[int, str] | None:
    """The first problem of ``script`` over ``faults`` (name, class): (line from 1, what)."""
    by_name = dict(faults)
    order = [name for name, _ in faults]
    for number, line in enumerate(script.splitlines(), 1):
        for match in EXPRESSION.finditer(line):
            problem = _problem(match.group(1), by_name, order)
            if problem:
                return number, problem
    return None


def _lookup(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def render(script: str, faults: Sequence[InjectedFault], *, registry: Registry[Fault] = FAULTS) -> str:
    """``script`` with every expression replaced by what ``faults`` (the scenario's, in its
    order) recorded; InvalidEpisode when a fault did not record what the script names."""
    names = getattr(script, "names", ()) or default_names([f.type for f in faults])
    by_name = dict(zip(names, faults, strict=False))  # a name past the faults is a miss below

    def substitute(match: re.Match[str]) -> str:
        expression = match.group(1)
        fix, field = _FIX.fullmatch(expression), _FIELD.fullmatch(expression)
        fault = by_name.get((fix or field).group(1)) if (fix or field) else None
        try:
            if fault is not None and fix:
                cls = registry.get(fault.type)
                repair = cls(cls.Params.model_validate(fault.params)).fix(fault.seeded)
                if repair is not None:
                    return repair
            elif fault is not None and field:
                return word(_lookup(fault.seeded, expression.split(".", 1)[1]))
        except (IndexError, KeyError, ValueError, TypeError):
            pass
        raise InvalidEpisode(f"solution names {match.group(0)}, which no fault recorded")

    return EXPRESSION.sub(substitute, script)
