"""The ground truth of an episode's injected faults: per fault, its host, the components a
report may name for it, its cause class and its seeded identity (a culprit's PID, the
file it changed). Declared by the fault types' recipes (``fixos.injector.recipes``), with
``FALLBACK`` for the variants no generator draws."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..core.models import InjectedFault
from ..injector.recipes import RECIPES, recipe_for

FALLBACK: dict[str, tuple[str, str]] = {
    "dependency_broken": ("dependency", "link:{link}"),
    "tls_key_mismatch": ("certificate", "file:/etc/nginx/tls"),
    "cron_rebreaker": ("scheduled_rebreaker", "cron:{target}"),
}
"""type -> (cause, component) for faults of the hand-written catalogue with no recipe."""

ALIASES = {
    "php-fpm": "php8.2-fpm",
    "php-fpm8.2": "php8.2-fpm",
    "php8.2-fpm": "php8.2-fpm",
    "fpm": "php8.2-fpm",
    "mysql": "mariadb",
    "mysqld": "mariadb",
    "mariadbd": "mariadb",
    "sshd": "ssh",
}
"""equivalent spellings of a service (docs/diagnosis.md)"""


@dataclass(frozen=True)
class Truth:
    host: str
    type: str
    cause: str
    component: str
    """its canonical id, as the oracle reports it"""
    components: frozenset[str]
    """canonical ids a finding may name for it (normalised: ``canonical``)"""
    identities: tuple[str, ...] = ()
    """seeded parts a finding should name: PIDs, files"""


def canonical(component: str) -> str:
    """``KIND:TARGET`` lower-cased, service names unaliased, a path without a trailing slash."""
    kind, _, target = component.strip().partition(":")
    kind, target = kind.strip().lower(), target.strip()
    if kind == "service":
        target = ALIASES.get(target.lower(), target.lower())
    elif target.startswith("/") and len(target) > 1:
        target = target.rstrip("/")
    return f"{kind}:{target}"


def _recipe_truth(fault: InjectedFault) -> tuple[str, str]:
    """The recipe drawn with these parameters; else the type's first recipe, its component
    taken from the fault's own service or path (``service_stopped`` of ssh, ``disk_fill`` of
    /tmp: variants the generator does not draw, which a scenario file may use)."""
    recipe = recipe_for(fault.type, fault.params)
    if recipe is not None:
        return recipe.cause, recipe.component
    same_type = [r for r in RECIPES if r.type == fault.type]
    if fault.type in FALLBACK:
        cause, component = FALLBACK[fault.type]
        return cause, component.format_map(_Blank(fault.params))
    cause = same_type[0].cause if same_type else "config_error"
    if isinstance(fault.params.get("service"), str):
        return cause, f"service:{fault.params['service']}"
    if isinstance(fault.params.get("path"), str):
        return cause, f"fs:{fault.params['path']}"
    return cause, same_type[0].component if same_type else f"host:{fault.host}"


class _Blank(dict):  # type: ignore[type-arg]
    def __missing__(self, key: str) -> str:
        return "?"


def _pids(seeded: dict[str, Any]) -> list[str]:
    if "pid" in seeded and seeded["pid"] is not None:
        return [str(seeded["pid"])]
    return [str(p["pid"]) for p in seeded.get("processes", []) if isinstance(p, dict) and "pid" in p]


def truths(faults: list[InjectedFault]) -> list[Truth]:
    """One Truth per injected fault, in injection order."""
    out = []
    for fault in faults:
        cause, component = _recipe_truth(fault)
        pids = _pids(fault.seeded)
        files = [fault.seeded["file"]] if isinstance(fault.seeded.get("file"), str) else []
        components = {
            canonical(component),
            *(f"process:{p}" for p in pids),
            *(canonical(f"file:{f}") for f in files),
        }
        identities = tuple(pids or files)
        out.append(
            Truth(fault.host, fault.type, cause, canonical(component), frozenset(components), identities)
        )
    return out


def names(identity: str, text: str) -> bool:
    """Whether ``text`` names ``identity`` as a word (PID 91 is not in 910)."""
    return re.search(rf"(?<![\w/.-]){re.escape(identity)}(?![\w/.-])", text) is not None


def truth_report(faults: list[Truth]) -> dict[str, Any]:
    """The report that names every fault rightly (the oracle's): full marks by construction."""
    findings = [
        {"host": t.host, "component": t.component, "cause": t.cause, "evidence": " ".join(t.identities)}
        for t in faults
    ]
    return {"healthy": not faults, "findings": findings}
