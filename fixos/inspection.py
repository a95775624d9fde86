"""The verifier's vantage point for one judgement: an inspector per host
(``fixos.stack.inspector``), started when the judgement starts and removed when
it ends, and the probes the checks look through.

A host that kills its inspector (a kill loop the agent left behind, ``kill -9
-1``) cannot be judged: every check of that host fails, with that reason. It is
the agent's doing, so the episode is scored, never invalid: an inspector whose
session dies, or that fails twice to start beside a host the engine still
runs. An inspector that cannot start beside a host that is gone is the
harness's failure (StackError).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import docker
from docker.errors import DockerException

from fixos.core.errors import ShellError, StackError
from fixos.core.models import CheckResult, CommandResult, Verdict
from fixos.stack.hosts import LiveHost
from fixos.stack.inspector import HOST_ROOT, Inspector
from fixos.verifier import CheckEntry, Probe
from fixos.verifier.backend import testinfra_host
from fixos.verifier.verify import reward_of

KILLED = "the host kills its inspector"


class WatchedShell:
    """An inspector's session that remembers the first time it broke."""

    def __init__(self, shell: object | None, error: str | None = None) -> None:
        self._shell = shell
        self.error = error

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        if self._shell is None:
            raise ShellError(self.error or "no inspector")
        try:
            return self._shell.run(command, timeout)  # type: ignore[attr-defined]
        except ShellError as exc:
            self.error = self.error or str(exc)
            raise

    def close(self) -> None:
        if self._shell is not None:
            with contextlib.suppress(Exception):
                self._shell.close()  # type: ignore[attr-defined]


@dataclass
class Looking:
    """The probes of one judgement, per host, and which hosts disturbed the look."""

    probes: dict[str, Probe]
    shells: dict[str, WatchedShell] = field(default_factory=dict)

    def disturbed(self) -> dict[str, str]:
        """host -> how its inspector broke, for every host whose inspector did."""
        return {name: shell.error for name, shell in self.shells.items() if shell.error}


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
        probes = {
            name: Probe(testinfra_host(shell, name), shell, hosts[name], patient, root=HOST_ROOT)  # type: ignore[arg-type]
            for name, shell in shells.items()
        }
        yield Looking(probes, shells)
    finally:
        for inspector in inspectors.values():
            inspector.close()


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
