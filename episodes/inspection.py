"""The verifier's vantage point for one judgement, and the probes the checks look
through: a session per host in the engine's long-lived judge (``fixos.stack.judge``,
``judged``), or, where the engine cannot run one, an inspector per host
(``fixos.stack.inspector``, ``inspected``) started when the judgement starts and
removed when it ends.

A host that kills its inspector (a kill loop the agent left behind, ``kill -9 -1``)
cannot be judged: every check of that host fails, with that reason. It is the agent's
doing, so the episode is scored, never invalid: an inspector whose session dies, or
that fails twice to start beside a host the engine still runs. One that cannot start
beside a host that is gone is the harness's failure (StackError).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import docker
from docker.errors import DockerException

from ..core.errors import ShellError, StackError
from ..core.models import CheckResult, Verdict
from ..shells.watched import SessionPool, WatchedShell
from ..stack.facts import HostFacts
from ..stack.hosts import LiveHost
from ..stack.inspector import HOST_ROOT, Inspector
from ..stack.judge import NAME_FILES, REFRESH_NAMES, Judge
from ..verifier import CheckEntry, Probe
from ..verifier.backend import kept_testinfra_host
from ..verifier.verify import MAX_CHECKS_AT_ONCE, reward_of

KILLED = "the host kills its inspector"
Memos = dict[str, dict[str, Any]]
"""per host, what checks keep from one judgement of an episode to the next (``Probe.memo``)"""


@dataclass
class Looking:
    """The probes of one judgement, per host, and which hosts disturbed the look."""

    probes: dict[str, Probe]
    shells: Mapping[str, WatchedShell | SessionPool] = field(default_factory=dict)
    workers: Executor | None = None
    """the threads the checks look in (``verify.judge``): an episode's, kept between judgements."""

    def disturbed(self) -> dict[str, str]:
        """host -> how its inspector broke, for every host whose inspector did."""
        return {name: shell.error for name, shell in self.shells.items() if shell.error}


def _looking(
    shells: Mapping[str, WatchedShell | SessionPool],
    hosts: Mapping[str, LiveHost],
    patient: bool,
    memos: dict[str, dict[str, Any]] | None = None,
    facts: Mapping[str, HostFacts | None] | None = None,
    across: MutableMapping[str, str] | None = None,
) -> Looking:
    """The probes of one judgement over each host's session, whichever vantage opened it;
    ``memos``: what checks keep per host from one judgement of an episode to the next;
    ``facts``: the judgement's fingerprints of each host, where taken."""
    probes = {
        name: Probe(
            kept_testinfra_host(shell, name, None if memos is None else memos.setdefault(name, {})),
            shell,  # type: ignore[arg-type]
            hosts[name],
            patient,
            root=HOST_ROOT,
            memo=None if memos is None else memos.setdefault(name, {}),
            known_facts=(facts or {}).get(name),
            across=across,
            world=hosts,
        )
        for name, shell in shells.items()
    }
    return Looking(probes, shells)


@contextlib.contextmanager
def inspected(
    client: docker.DockerClient, hosts: Mapping[str, LiveHost], image: str, *, patient: bool
) -> Iterator[Looking]:
    """One inspector per host for one judgement, always removed. StackError when the
    engine cannot start one; a host that kills its own is marked in ``disturbed``."""
    inspectors = {name: Inspector(client, host, image) for name, host in hosts.items()}
    try:
        with ThreadPoolExecutor(max_workers=max(1, len(inspectors))) as starters:
            errors = list(starters.map(_start, inspectors.values()))
        shells: dict[str, WatchedShell] = {}
        for (name, inspector), error in zip(inspectors.items(), errors, strict=True):
            if isinstance(error, StackError) and _running(client, hosts[name]):
                error = _start(inspector)  # once more: the engine's hiccup, or the host's doing
            if error is None:
                shells[name] = WatchedShell(inspector.shell)
            elif isinstance(error, ShellError) or (
                isinstance(error, StackError) and _running(client, hosts[name])
            ):  # it started, or the engine tried, and the host killed what joined it
                shells[name] = WatchedShell(None, f"{KILLED}: {error}")
            else:
                raise error
        yield _looking(shells, hosts, patient)
    finally:
        for inspector in inspectors.values():
            inspector.close()


class JudgeSessions:
    """One session per host in the engine's judge, kept from one judgement of an episode to
    the next: opening one (an engine exec, entering the host's namespaces, a /proc mount, a
    bash) costs more than most judgements' commands, and the running score judges again and
    again. Each judgement first asks every kept session to echo a token it has never seen
    (root in the host sees the session's processes, though it can neither enter nor trace
    them); one that does not answer as itself at once is replaced; one that does copies
    the host's name files again (the agent may have repaired /etc/hosts since). The sessions
    are the episode's only: ``close`` ends them with it.

    A host whose session does not open, or breaks, while the engine still runs it is marked
    in ``disturbed`` (a kill loop); one the engine no longer runs is StackError. The checks
    look in threads kept too: started anew, 6-17 threads a judgement each waited for the
    interpreter's lock to start where sessions run side by side."""

    ANSWER_SECONDS = 5.0
    """how long a kept session may take to echo its token; past it, a new one is opened."""
    SESSIONS_PER_HOST = 3
    """how many commands of one judgement may run at once in a host (``SessionPool``): with
    three, progress took 96 instead of 127 ms on easy_1. The checks that list the host's
    processes by name (``processes_intact``) look ``alone``, before any other command of the
    judgement runs: beside them they once recorded the judge's other sessions' commands
    (find, mount, mariadb) as the healthy host's programs (12 healthy hosts refused)."""

    def __init__(self, judge: Judge, hosts: Mapping[str, LiveHost], memos: Memos | None = None) -> None:
        self.judge = judge
        self.hosts = hosts
        self._kept: dict[str, SessionPool] = {}
        self._memos: Memos = {name: dict(entries) for name, entries in (memos or {}).items()}
        self._names: dict[str, bytes] = {}
        """per host, the fingerprint of its name files when its sessions last copied them."""
        self._answered: dict[str, bytes] = {}
        """per host, the fingerprint of its processes when its sessions last answered."""
        self._workers: ThreadPoolExecutor | None = None

    @classmethod
    def kept(
        cls, sessions: JudgeSessions | None, judge: Judge | None, hosts: Mapping[str, LiveHost], memos: Memos
    ) -> JudgeSessions | None:
        """``sessions`` when they serve ``judge`` on ``hosts``; else new ones (those closed)
        whose checks find ``memos`` kept per host (``phases.tests_before_faults``)."""
        if sessions is not None and sessions.judge is judge and sessions.hosts is hosts:
            return sessions
        if sessions is not None:
            sessions.close()
        return None if judge is None else cls(judge, hosts, memos)

    def _open(self, name: str) -> WatchedShell:
        try:
            return WatchedShell(self.judge.session(self.hosts[name]))
        except (ShellError, StackError) as exc:
            if self.judge.alive() and _running(self.judge.client, self.hosts[name]):
                return WatchedShell(None, f"{KILLED}: {exc}")
            raise  # the host is gone, or the judge: the harness's failure

    def _answers(self, shell: WatchedShell, refresh: bool = True) -> bool:
        if shell.error is not None:
            return False
        token = secrets.token_hex(8)
        copy = REFRESH_NAMES if refresh else ""
        try:
            answer = shell.run(f"{copy} builtin echo {token}", timeout=self.ANSWER_SECONDS)
        except ShellError:
            return False
        return answer.ok and answer.output.strip() == token

    def _ready(self, name: str, facts: HostFacts | None) -> SessionPool:
        # The copies of the name files are taken again only when the files changed since
        # the last copy (the facts fingerprint them; without facts, always): ~8 ms a session.
        # Nor are kept sessions asked to answer when none of the host's processes changed
        # since they last did (the facts list the sessions' own, with their state): root in
        # the host can kill or stop them, which changes that, and can neither enter nor trace
        # them. ~4 ms a step.
        names, processes = _names_of(facts), _processes_of(facts)
        kept, copied = self._kept.pop(name, None), self._names.pop(name, None)
        answered = self._answered.pop(name, None)
        if kept is not None:
            refresh = names is None or names != copied
            if not refresh and kept.error is None and processes is not None and processes == answered:
                self._names[name], self._answered[name] = copied, processes  # type: ignore[assignment]
                return kept
            if kept.keep_answering(lambda shell: self._answers(shell, refresh)):
                if names is not None:
                    self._names[name] = names
                if processes is not None:
                    self._answered[name] = processes
                return kept
            kept.close()
        pool = SessionPool(self._open(name), lambda: self._open(name), self.SESSIONS_PER_HOST)
        if names is not None:
            self._names[name] = names  # a session copies them when it opens
        return pool

    @contextlib.contextmanager
    def looking(self, *, patient: bool) -> Iterator[Looking]:
        """The probes of one judgement over the kept sessions (opened or renewed as needed)."""
        names = list(self.hosts)
        facts = {name: _facts_of(self.hosts[name]) for name in names}
        if self._workers is None:
            self._workers = ThreadPoolExecutor(MAX_CHECKS_AT_ONCE, thread_name_prefix="checks")
        ready = {name: self._workers.submit(self._ready, name, facts[name]) for name in names[1:]}
        failed = []
        try:
            self._kept[names[0]] = self._ready(names[0], facts[names[0]])
        except Exception as exc:  # the others' still end first
            failed.append(exc)
        failed += [f.exception() for f in ready.values() if f.exception() is not None]
        for name, future in ready.items():
            if future.exception() is None:
                self._kept[name] = future.result()
        if failed:
            raise failed[0]  # type: ignore[misc]
        looking = _looking(dict(self._kept), self.hosts, patient, self._memos, facts, self.judge.lent)
        yield replace(looking, workers=self._workers)

    def close(self) -> None:
        kept, self._kept = self._kept, {}
        for shell in kept.values():
            shell.close()
        if self._workers is not None:
            self._workers.shutdown(wait=False, cancel_futures=True)


@contextlib.contextmanager
def judged(judge: Judge, hosts: Mapping[str, LiveHost], *, patient: bool) -> Iterator[Looking]:
    """A session per host in the engine's judge for one judgement, always closed
    (``JudgeSessions`` keeps them for an episode's next judgement)."""
    sessions = JudgeSessions(judge, hosts)
    try:
        with sessions.looking(patient=patient) as looking:
            yield looking
    finally:
        sessions.close()


def vantage(
    client: docker.DockerClient,
    hosts: Mapping[str, LiveHost],
    image: str,
    judge: Judge | None,
    *,
    patient: bool,
    sessions: JudgeSessions | None = None,
) -> contextlib.AbstractContextManager[Looking]:
    """The vantage point of one judgement: sessions in ``judge`` (``sessions``, an episode's
    kept ones, when given), or, where the engine cannot run a judge (or
    ``FIXOS_VANTAGE=inspector``), inspectors started for it and removed after."""
    if judge is not None and os.environ.get("FIXOS_VANTAGE") != "inspector" and judge.usable:
        if sessions is not None:
            return sessions.looking(patient=patient)
        return judged(judge, hosts, patient=patient)
    return inspected(client, hosts, image, patient=patient)


def _names_of(facts: HostFacts | None) -> bytes | None:
    """The fingerprint of the host's name files; None when it cannot be read (a host that
    stopped: what the sessions find out is then the judgement's to tell)."""
    try:
        return None if facts is None else facts.files((), entries=NAME_FILES)
    except OSError:
        return None


def _processes_of(facts: HostFacts | None) -> bytes | None:
    """The fingerprint of the host's processes; None when it cannot be read."""
    try:
        return None if facts is None else facts.processes()
    except OSError:
        return None


def _facts_of(host: LiveHost) -> HostFacts | None:
    """A judgement's fingerprints of ``host`` (read as checks ask), where this machine reads it."""
    read = getattr(host, "facts", None)
    return read() if read is not None else None


def _running(client: docker.DockerClient, host: LiveHost) -> bool:
    """The host itself still runs, as the engine says: what failed was only what joined it."""
    try:
        return client.containers.get(host.handle.container_id).status == "running"
    except DockerException:
        return False


def _start(inspector: Inspector) -> BaseException | None:
    try:
        inspector.start()
    except BaseException as exc:  # judged by the caller once every start has ended
        return exc
    return None


def failing_disturbed(
    verdict: Verdict, entries: Sequence[CheckEntry], disturbed: Mapping[str, str]
) -> Verdict:
    """``verdict`` with every check of a host whose inspector broke failed, for that reason."""
    if not disturbed:
        return verdict
    host_of = {entry.name: entry.host for entry in entries}
    checks: list[CheckResult] = []
    for result in verdict.checks:
        why = disturbed.get(host_of.get(result.name, ""))
        if why is not None:
            reason = why if why.startswith(KILLED) else f"{KILLED}: {why}"
            result = replace(result, passed=False, detail=reason[:300])
        checks.append(result)
    return Verdict(reward=reward_of(checks), checks=checks)
