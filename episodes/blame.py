"""Who broke an episode once the agent has had the host: the harness only when
evidence the agent could not have caused says so.

Root inside a host can kill its own shells, remove bash, fork-bomb the PID limit,
fill the disk or halt the host; then the verifier may fail to look at it, and
that is the agent's doing, scored (usually 0). The agent cannot make the Docker
engine stop answering, nor remove its container from the engine: those, asked
of the engine itself after the failure, are the harness's, and the episode is
invalid. A container that has stopped while the engine answers was halted from
inside (or ran out of memory under what the agent ran): the agent's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import docker
from docker.errors import DockerException, NotFound
from requests.exceptions import RequestException

from ..core.errors import ShellError, StackError
from ..core.models import CheckResult, Verdict
from ..records.failures import ENGINE_ERRORS, unjudgeable
from ..records.models import EpisodeRecord

_LOOKS = (ShellError, StackError, *ENGINE_ERRORS)
"""what a verdict that could not look at a host raises: the agent's doing unless the engine says otherwise."""


def harness_evidence(client: docker.DockerClient, container_ids: Iterable[str]) -> str | None:
    """Why the harness is to blame, from the engine alone; None when the engine answers
    and every host is still there (running or stopped)."""
    try:
        client.ping()
    except (DockerException, RequestException, OSError) as exc:
        return f"the Docker engine does not answer ({type(exc).__name__}: {exc})"
    for container_id in container_ids:
        try:
            client.api.inspect_container(container_id)
        except NotFound:
            return f"host container {container_id[:12]} is gone from the engine"
        except (DockerException, RequestException, OSError) as exc:
            return f"the engine cannot say how host {container_id[:12]} is ({type(exc).__name__}: {exc})"
    return None


def running(client: docker.DockerClient, container_ids: Iterable[str]) -> bool:
    """Every host still runs (a failure then may be passing: worth one more look)."""
    try:
        return all(client.api.inspect_container(c)["State"]["Running"] for c in container_ids)
    except (DockerException, RequestException, OSError, KeyError):
        return False


def final_verdict(
    verify: Callable[[], Verdict], client: docker.DockerClient, hosts: Sequence[str], record: EpisodeRecord
) -> Verdict:
    """The final verdict (``verify``) of the episode on containers ``hosts``; when the verifier
    cannot look at a host the agent left, a 0 the agent earned (``host_unjudgeable``), unless
    the engine itself shows the harness failed (``harness_evidence``), which is raised as the
    harness's failure."""
    try:
        return verify()
    except _LOOKS as exc:
        if harness_evidence(client, hosts) is not None:
            raise
        if not running(client, hosts):
            failed: BaseException = exc
        else:  # the host is up: one more look, in case the failure was passing load
            try:
                return verify()
            except _LOOKS as again:
                if harness_evidence(client, hosts) is not None:
                    raise
                failed = again
    record.failure = unjudgeable(failed)
    detail = f"the verifier could not look at the host the agent left: {record.failure.detail}"
    return Verdict(0.0, [CheckResult("the host can be judged", "judgeable", False, False, 1.0, detail)])
