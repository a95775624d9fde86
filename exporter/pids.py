"""Processes the replay pinned to a PID, found again by name.

The replay forks its way up to each pinned PID, but the host keeps forking on
its own meanwhile (a batch job's clients, MariaDB's threads), so now and then
the pinned process lands a few PIDs further on. Everything an exported task
runs against such a process (the reference repair, the settle waits) asks
``pid_of PROGRAM PID`` instead of trusting the number: the pinned PID when it
runs PROGRAM's name, else the oldest process running PROGRAM (its path as the
fault recorded it; a bare name is in /usr/local/bin). Never by name alone: the
host runs innocent programs that share a culprit's name.
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any

from ..core.models import InjectedFault
from ..scenarios.solution import Verbatim

PID_OF = (
    "pid_of() {  # PROGRAM PID: where the replay's PROGRAM runs (see exporter/pids.py)\n"
    '    local path="$1"; [ "${path#/}" != "$path" ] || path="/usr/local/bin/$1"\n'
    '    local name="${path##*/}"\n'
    '    if [ "$(cat /proc/$2/comm 2>/dev/null)" = "${name:0:15}" ]; then echo "$2"; return; fi\n'
    '    pgrep -o -f "^([^ ]+ )?$path( |\\$)"\n'
    "}\n"
)
"""the bash function every script that names a fault's PID defines first."""


def pid_of(program: str, pid: int) -> str:
    """A shell word for the PID of ``program``'s process (its path, or a bare name
    in /usr/local/bin), pinned at ``pid`` at export."""
    return f'"$(pid_of {shlex.quote(program)} {int(pid)})"'


def _located(value: Any) -> Any:
    if isinstance(value, list):
        return [_located(v) for v in value]
    if isinstance(value, dict):
        out = {k: _located(v) for k, v in value.items()}
        if isinstance(value.get("name"), str) and isinstance(value.get("pid"), int):
            out["pid"] = Verbatim(pid_of(value.get("path") or value["name"], value["pid"]))
        return out
    return value


def located(faults: list[InjectedFault]) -> list[InjectedFault]:
    """The faults as a solution for the replay should name them: each recorded
    ``{name, pid}`` pair's PID becomes a ``pid_of`` lookup."""
    return [dataclasses.replace(f, seeded=_located(f.seeded)) for f in faults]
