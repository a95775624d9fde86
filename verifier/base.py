"""The Check contract, the registry, and what a check may look at."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import testinfra.host
from pydantic import BaseModel, ConfigDict

from fixos.core.models import HttpResponse, Outcome
from fixos.core.registry import Registry
from fixos.shells.base import Shell
from fixos.verifier.vantage import under


class HostAccess(Protocol):
    """Ways to look at a host from outside it, which nothing inside can fake.

    An access may also offer ``changes() -> dict[str, str]``: path -> ``A``/``C``/``D``
    against the image, from the engine (``LiveHost.changes``); without it the
    ``programs_unchanged`` gate cannot judge (the exported in-host verifier).
    """

    name: str

    def http_get(self, port: int, path: str, timeout: float = 5.0) -> HttpResponse: ...

    def read_file(self, path: str) -> bytes | None: ...


@dataclass
class Probe:
    """Everything a check may use: testinfra over the verifier's own session (in an inspector,
    or in the host for the exported verifier), and outside access."""

    host: testinfra.host.Host
    shell: Shell
    access: HostAccess
    patient: bool = True
    """False while the harness checks its own set-up: checks skip their waiting."""
    root: str = ""
    """where ``shell`` sees the host's filesystem: ``""`` from inside the host (the exported
    verifier), ``/proc/1/root`` from an inspector (``fixos.verifier.vantage``)."""

    memo: dict[str, Any] | None = None
    """what a check may keep between the judgements of one host in one episode (the
    daemons' config tests, keyed by what they read: ``fixos.verifier.integrity``);
    None where nothing is kept."""

    def path(self, path: str) -> str:
        """``path`` on the host as ``shell`` reaches it."""
        return under(self.root, path)


class CheckParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Check:
    """One property of a repaired host. Subclasses set ``type`` and ``Params``.

    ``snapshot`` records evidence from the healthy host before any fault (for
    "unchanged" checks); ``refine`` may narrow it once the faults are in, before
    the agent starts; ``evaluate`` judges the host after the agent, given that
    evidence. A check never raises for a failing host: it returns a failed Outcome.
    """

    type: ClassVar[str]
    Params: ClassVar[type[CheckParams]] = CheckParams
    exported: ClassVar[bool] = True
    """Whether an exported task's verifier, inside the task's own container, can judge it:
    False where the evidence is the build's (keys made at first boot) or the judge's to
    take (what the task's runner leaves running); the export then records none, and the
    check passes there saying "not judged"."""
    alone: ClassVar[bool] = False
    """Looks at the host before the other checks start, with nothing else running:
    for a check that other checks' probes would disturb (a CPU sample)."""

    def __init__(self, params: CheckParams) -> None:
        self.params = params

    def snapshot(self, probe: Probe) -> Any:
        return None

    def refine(self, probe: Probe, baseline: Any) -> Any:
        return baseline

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        raise NotImplementedError


CHECKS: Registry[Check] = Registry("check type")
"""Every check type: each class registers itself with ``@CHECKS.register`` (see the end of this module)."""


# The check modules register their classes as they load; loading them here means
# whoever holds CHECKS holds every type. They import this module, hence the end.
from fixos.verifier import (  # noqa: E402, F401
    configuration,
    database,
    files,
    http,
    identities,
    integrity,
    logs,
    modes,
    network,
    posture,
    running,
    service,
    steady,
    system,
    tables,
    tls,
)
