"""How an episode can fail, as a table: who is at fault, whether the episode is
still scored, whether the bench runs it again.

An agent's own failure is part of its score; only the harness's failures make an
episode invalid, and only those worth a second try are retried (a bug in FixOS
fails the same way twice). ``harness_failure`` is the one place that maps the
exceptions the harness raises onto kinds.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from enum import StrEnum

import docker.errors
import requests.exceptions
from pydantic import BaseModel, ConfigDict, Field

from ..core.errors import (
    EngineError,
    InvalidEpisode,
    ShellError,
    SolutionFailed,
    StackError,
    UnhealthyHost,
)
from ..core.models import ScriptFailure


class EpisodeStatus(StrEnum):
    scored = "scored"
    """judged: the reward counts (an agent that crashed is judged on the host it left)."""
    invalid = "invalid"
    """the harness could not set up or judge the episode: never scored."""
    interrupted = "interrupted"
    """stopped by Ctrl-C; never journaled, so ``--resume`` runs it again."""


class AtFault(StrEnum):
    agent = "agent"
    harness = "harness"


class FailureKind(StrEnum):
    agent_error = "agent_error"
    agent_shell_lost = "agent_shell_lost"
    host_unjudgeable = "host_unjudgeable"
    engine_error = "engine_error"
    boot_failed = "boot_failed"
    healthy_check_failed = "healthy_check_failed"
    fault_unconfirmed = "fault_unconfirmed"
    shell_lost = "shell_lost"
    harness_bug = "harness_bug"
    interrupted = "interrupted"


@dataclass(frozen=True)
class FailureClass:
    at_fault: AtFault
    status: EpisodeStatus
    """what the episode's status is when it ends this way."""
    retried: bool
    """whether the bench runs the episode once more (at most once)."""
    meaning: str


FAILURES: dict[FailureKind, FailureClass] = {
    FailureKind.agent_error: FailureClass(
        AtFault.agent, EpisodeStatus.scored, False, "the agent raised; judged on the host it left"
    ),
    FailureKind.agent_shell_lost: FailureClass(
        AtFault.agent,
        EpisodeStatus.scored,
        False,
        "the agent's own session broke (its exit or kill, bash gone, host halted); judged as left",
    ),
    FailureKind.host_unjudgeable: FailureClass(
        # only when the engine answers and the host is still there: evidence the agent
        # cannot fake that the harness itself is sound (``blame.harness_evidence``)
        AtFault.agent,
        EpisodeStatus.scored,
        False,
        "the agent left its host unable to be judged (halted, out of processes, no shell): scored 0",
    ),
    FailureKind.engine_error: FailureClass(
        AtFault.harness, EpisodeStatus.invalid, True, "the Docker engine failed or did not answer"
    ),
    FailureKind.boot_failed: FailureClass(
        AtFault.harness, EpisodeStatus.invalid, True, "a host did not boot or became unreachable"
    ),
    FailureKind.healthy_check_failed: FailureClass(
        # retried: on a loaded machine a healthy check can misread once (see NOTES on no_cpu_hog)
        AtFault.harness,
        EpisodeStatus.invalid,
        True,
        "a check fails on the healthy host",
    ),
    FailureKind.fault_unconfirmed: FailureClass(
        AtFault.harness, EpisodeStatus.invalid, True, "a fault could not be injected or confirmed"
    ),
    FailureKind.shell_lost: FailureClass(
        AtFault.harness, EpisodeStatus.invalid, True, "a shell session broke"
    ),
    FailureKind.harness_bug: FailureClass(
        AtFault.harness, EpisodeStatus.invalid, False, "an unexpected exception in FixOS: it would recur"
    ),
    FailureKind.interrupted: FailureClass(
        AtFault.harness, EpisodeStatus.interrupted, False, "torn down by Ctrl-C while it ran"
    ),
}

ENGINE_ERRORS = (EngineError, docker.errors.DockerException, requests.exceptions.RequestException)
"""docker-py's and requests' own errors (a timeout under load) escape the stack now and then."""

EXCEPTION_KINDS: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], FailureKind], ...] = (
    # most specific first: the first row whose type matches decides
    (UnhealthyHost, FailureKind.healthy_check_failed),
    (InvalidEpisode, FailureKind.fault_unconfirmed),
    (StackError, FailureKind.boot_failed),
    (ShellError, FailureKind.shell_lost),
    (ENGINE_ERRORS, FailureKind.engine_error),
    (KeyboardInterrupt, FailureKind.interrupted),
)


class Failure(BaseModel):
    """How an episode failed: the kind (a row of ``FAILURES``) and what happened."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: FailureKind
    detail: str
    script: ScriptFailure | None = Field(default=None, exclude_if=lambda v: v is None)
    """a reference repair that stopped (the oracle's, the partial's): its line, exit code and
    output; left out of the file when None, so other failures are saved as before."""

    @property
    def text(self) -> str:
        return f"{self.kind}: {self.detail}"

    @property
    def retried(self) -> bool:
        return FAILURES[self.kind].retried

    @property
    def status(self) -> EpisodeStatus:
        return FAILURES[self.kind].status


def kind_of(exc: BaseException) -> FailureKind:
    """The kind of a failure the harness raised (anything unforeseen is a harness bug)."""
    for types, kind in EXCEPTION_KINDS:
        if isinstance(exc, types):
            return kind
    return FailureKind.harness_bug


def harness_failure(exc: BaseException) -> Failure:
    kind = kind_of(exc)
    detail = f"{type(exc).__name__}: {exc}"
    if kind is FailureKind.harness_bug:
        frames = traceback.extract_tb(exc.__traceback__)
        if frames:
            detail += f" (at {frames[-1].filename}:{frames[-1].lineno})"
    return Failure(kind=kind, detail=detail)


def agent_failure(exc: BaseException) -> Failure:
    """The agent's own exception: the episode is still judged on the host it left. A
    ShellError out of the agent's own session is its session's loss (``agent_shell_lost``)."""
    if isinstance(exc, ShellError):
        return Failure(kind=FailureKind.agent_shell_lost, detail=f"the agent's session broke: {exc}")
    if isinstance(exc, SolutionFailed):
        return Failure(kind=FailureKind.agent_error, detail=str(exc), script=exc.failure)
    return Failure(kind=FailureKind.agent_error, detail=f"agent raised {type(exc).__name__}: {exc}")


def unjudgeable(exc: BaseException) -> Failure:
    """The verifier could not look at a host the agent left, while the engine answers
    and the host is there: the agent's doing, scored (0)."""
    return Failure(kind=FailureKind.host_unjudgeable, detail=f"{type(exc).__name__}: {exc}")


def retry_wanted(failure: Failure | None) -> bool:
    """Whether the bench should run an episode that ended this way once more."""
    return failure is not None and failure.retried
