"""The Check contract, the registry, and what a check may look at."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import testinfra.host
from pydantic import BaseModel, ConfigDict

from ..core.models import CommandResult, Connection, HostProcess, HttpResponse, Outcome
from ..core.registry import Registry
from ..shells.base import Shell
from .vantage import MARIADB_SOCKET, mariadb_command, under
from .wire import MariaDB

SQL_TRIES = 16
"""how often ``Probe.sql`` asks while the server says "Too many connections"."""


class Facts(Protocol):
    """Fingerprints of a host's state read from outside it (``fixos.stack.facts``): equal
    fingerprints at two judgements mean nothing they cover changed in between."""

    def files(self, trees: Sequence[str], *, contents: bool = True, entries: Sequence[str] = ()) -> bytes: ...

    def processes(self) -> bytes: ...

    def process_table(self) -> list[HostProcess]: ...

    def listener_lines(self) -> list[str] | None: ...

    def tcp_owners(self, port: int) -> list[str] | None: ...

    def dying_text(self) -> str: ...

    def listening(self) -> bytes: ...

    def modes(self, trees: Sequence[str]) -> dict[str, str] | None: ...

    def entries(self) -> list[tuple[str, int, int, int, int, int, int, int]] | None: ...

    def connections(self) -> list[Connection] | None: ...

    def servers_holding(self, inodes: set[int]) -> dict[int, str]: ...


class HostAccess(Protocol):
    """Ways to look at a host from outside it, which nothing inside can fake.

    An access may also offer ``changes() -> dict[str, str]``: path -> ``A``/``C``/``D``
    against the image, from the engine (``LiveHost.changes``); without it the
    ``programs_unchanged`` gate cannot judge (the exported in-host verifier). And
    ``facts() -> Facts | None`` (``LiveHost.facts``): without them, nothing is kept.
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
    holding: bool = True
    """whether checks wait out their own hold periods when patient (a page that must stay
    up): a final verdict holds in its last judgement only (``fixos.episodes.durability``)."""
    root: str = ""
    """where ``shell`` sees the host's filesystem: ``""`` from inside the host (the exported
    verifier), ``/proc/1/root`` from an inspector (``fixos.verifier.vantage``)."""

    memo: dict[str, Any] | None = None
    """what a check may keep between the judgements of one host in one episode (the
    daemons' config tests, keyed by what they read: ``fixos.verifier.integrity``);
    None where nothing is kept."""

    across: MutableMapping[str, str] | None = None
    """answers one host's judgement may lend another's of the same image on the same engine
    (the judge's: daemons' config tests keyed by what they read, ``fixos.verifier.config_tests``,
    and kept on disk, ``fixos.records.config_answers``); None where nothing is lent."""

    db_turn: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    """one SQL client of this judgement at a time in the host (``sql``)."""

    settled: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    """set once this judgement's reward is 0.0 whatever the checks still looking find (a gate
    failed): a check may then stop waiting (a page that does not answer, a hold period);
    ``verify`` shares one between the probes of a judgement."""
    world: Mapping[str, HostAccess] = field(default_factory=dict, repr=False, compare=False)
    """the judgement's hosts by name, this one among them: where a page's request may wait
    (``fixos.verifier.held``); empty where a probe is made alone."""
    known_facts: Facts | None = field(default=None, repr=False, compare=False)
    """this judgement's fingerprints of the host, where the vantage took them already."""
    _facts: list[Facts | None] = field(default_factory=list, repr=False, compare=False)
    _facts_turn: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def facts(self) -> Facts | None:
        """The host's fingerprints for this judgement (each kind read when first asked: the
        ``alone`` checks ask before any other check's command runs), where outcomes may be
        kept: a running score (not ``patient``) with a memo, on a host read from this machine."""
        with self._facts_turn:
            if not self._facts:
                read = getattr(self.access, "facts", None)
                usable = self.memo is not None and not self.patient and read is not None
                found = self.known_facts or (read() if usable and read is not None else None)
                self._facts.append(found if usable else None)
            return self._facts[0]

    def _here(self) -> Facts | None:
        """The host as this machine reads it now, None where it cannot."""
        read = getattr(self.access, "facts", None)
        return read() if read is not None else None

    def process_table(self) -> list[HostProcess] | None:
        """The host's processes read now from this machine (``Facts.process_table``), None
        where this machine cannot (then a check lists them through ``shell``)."""
        facts = self._here()
        return facts.process_table() if facts is not None else None

    def listener_lines(self) -> list[str] | None:
        """The host's listeners read now from this machine (``Facts.listener_lines``), None
        where this machine cannot."""
        facts = self._here()
        return facts.listener_lines() if facts is not None else None

    def tcp_owners(self, port: int) -> list[str] | None:
        """Who holds a listening TCP socket on ``port``, as ``ss -p`` names them, read now from
        this machine (``Facts.tcp_owners``: [] when nothing listens); None where it cannot."""
        facts = self._here()
        return facts.tcp_owners(port) if facts is not None else None

    def _wire(self) -> MariaDB | None:
        """The host's MariaDB asked from this machine where its root is (``HostFiles``); None
        elsewhere (then the judge's client asks)."""
        local = getattr(self.access, "local_files", None)
        root = local() if local is not None else None
        if root is None:
            return None
        return MariaDB(lambda timeout: root.connect(MARIADB_SOCKET, timeout), MARIADB_SOCKET)

    def path(self, path: str) -> str:
        """``path`` on the host as ``shell`` reaches it."""
        return under(self.root, path)

    def sql(self, query: str, *, timeout: float = 20.0, connect_timeout: int | None = 5) -> CommandResult:
        """``query`` through the looking side's client as the host's root (stderr kept),
        one at a time per host and judgement. MariaDB keeps a single connection beyond
        ``max_connections`` for an admin: with a flood holding every ordinary one
        (hard_4), the checks that asked at once all got "Too many connections" but one.
        Asked again while that lasts: a client killed mid-handshake holds the slot for a
        moment, on a loaded machine for more than a second (about 5 s in all)."""
        wire = self._wire()
        command = mariadb_command(query, self.root, connect_timeout=connect_timeout) + " 2>&1"
        with self.db_turn:
            for _ in range(SQL_TRIES):
                if wire is not None:
                    # from this machine, a connection for this question only: one kept open
                    # would hold the one slot MariaDB keeps for an admin, which the agent needs
                    # against a flood (medium_7), and count among THREADS_CONNECTED
                    out = wire.query(query, timeout=timeout, connect_timeout=connect_timeout)
                    wire.close()
                else:
                    out = self.shell.run(command, timeout=timeout)
                if "Too many connections" not in out.output:
                    break
                time.sleep(0.3)
        return out


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

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        """What this check's outcome follows from, as ``facts`` fingerprint it: where that
        is the same as at the episode's previous judgement, a running score keeps the
        outcome instead of looking again (``verify``). None, the default: looked at every
        time (what no fingerprint covers: a daemon's protocol, pages, CPU)."""
        return None


CHECKS: Registry[Check] = Registry("check type")
"""Every check type: each class registers itself with ``@CHECKS.register`` (see the end of this module)."""


# The check modules register their classes as they load; loading them here means
# whoever holds CHECKS holds every type. They import this module, hence the end.
from . import (  # noqa: E402, F401
    auth,
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
    untouched,
)
