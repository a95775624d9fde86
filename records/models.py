"""The files of results/<run-id>/ as models: the journal line of each episode
(episodes.jsonl), and per episode its transcript, faults and reward; summary.json
is in ``records.summary``. The transcript of an episode is
``<run-id>/<episode_id>/transcript.jsonl``, found by the record's ``episode_id``."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.models import InjectedFault, Step, Verdict
from .failures import EpisodeStatus, Failure
from .saved import Saved


class Timings(BaseModel):
    """Where an episode's time went; the episode fills it in as its phases end."""

    model_config = ConfigDict(extra="forbid")

    reset: float = 0.0
    """seconds from asking for a host to the fault being confirmed."""
    boot: float = 0.0
    """the part of ``reset`` spent getting booted hosts (near 0 from a warm pool)."""
    agent: float = 0.0
    verify: float = 0.0
    step_mean: float = 0.0

    @property
    def wall(self) -> float:
        return self.reset + self.agent + self.verify


class Diagnosed(BaseModel):
    """How the agent's report named the faults (``fixos.diagnosis``): beside ``reward``."""

    model_config = ConfigDict(extra="forbid")
    score: float
    recall: float = 0.0
    precision: float = 0.0
    per_fault: list[dict[str, Any]] = Field(default_factory=list)
    source: str = "none"
    """where the report came from: ``agent`` (its ``report()``), ``file`` (``fixos verify
    --report``), or ``none`` (no report: 0.0 on a broken world)"""
    error: str | None = None
    """a report that did not parse, in one line naming the field (it scores 0.0)"""


class FileChange(BaseModel):
    """One path a host held otherwise than its image as the agent left it, or that the agent
    changed since the faults were confirmed (``fixos.stack.disk_diff``). Secrets are redacted
    before it is built."""

    model_config = ConfigDict(extra="forbid")

    path: str
    kind: Literal["added", "changed", "deleted", "as image"]
    """against the image, as left; ``as image``: the agent took back what stood at confirmation."""
    agent: bool = False
    """changed between the confirmation of the faults and the agent's last step."""
    faults: bool = False
    """changed between the healthy host and the confirmation: the faults' injection."""
    what: str = ""
    """one line: text or binary and sizes, a link's target, a mode or owner that moved."""
    diff: str = ""
    """a unified diff of the image's text against the left one (capped), when both are text."""
    agent_diff: str = ""
    """the agent's own diff (as confirmed against as left), where the host held the file
    otherwise than its image at confirmation; else ``diff`` is the agent's."""


class HostDisk(BaseModel):
    """What one host holds otherwise than its image at the end of the agent's turn."""

    model_config = ConfigDict(extra="forbid")

    host: str
    files: list[FileChange] = Field(default_factory=list)
    note: str = ""
    """why it was not read (a remote engine), or what was left out (a cap)."""
    marked: bool = True
    """False when the readings before the agent's turn are missing: no path is marked then."""


class EpisodeRecord(Saved):
    """One finished (or invalid) episode: one line of episodes.jsonl."""

    run_id: str
    episode_id: str
    scenario: str
    difficulty: str
    seed: int
    agent: str
    status: EpisodeStatus
    reward: float | None
    solved: bool
    steps: int
    timings: Timings
    faults: list[InjectedFault] = Field(default_factory=list)
    families: list[str] = Field(default_factory=list)
    """the fault families of the scenario's faults (injector.families), each once: the bench
    reports solve rates per family; known even when the episode is invalid."""
    verdict: Verdict | None = None
    failure: Failure | None = None
    """why it is invalid, or the agent's own crash in an episode still scored."""
    images: dict[str, str] = Field(default_factory=dict)
    """image tag -> image id of each host."""
    engine: str | None = None
    """the Docker engine it ran on, when a run spreads over several."""
    diagnosis: Diagnosed | None = None
    """the agent's report graded against the injected faults (``fixos.diagnosis``)."""
    task: str = "repair"
    """the task level (``fixos.episodes.tasks``): ``repair``, or a report-only level
    (``diagnose``, ``localise``, ``detect``) whose reward is the report's grade."""
    control: bool = False
    """a fault-free world: nothing was broken, the right repair is none."""
    disk: list[HostDisk] | None = None
    """per host, what it held otherwise than its image as the agent left it, and who changed
    it (``fixos.stack.disk_diff``); None when not recorded (older records, an episode that
    ended before the agent's turn did)."""

    @property
    def scored(self) -> bool:
        return self.status is EpisodeStatus.scored

    @property
    def error(self) -> str | None:
        """The failure as one line (``kind: detail``), or None."""
        return None if self.failure is None else self.failure.text

    def fail(self, failure: Failure) -> None:
        """End as ``failure`` says: its status from the failure table, no score."""
        self.failure = failure
        self.status = failure.status
        self.reward, self.solved, self.verdict = None, False, None


class StepLine(Saved):
    """One agent command: one line of an episode's transcript.jsonl."""

    index: int
    command: str
    output: str
    exit_code: int
    duration: float
    started_at: float
    timed_out: bool = False

    @classmethod
    def of(cls, step: Step) -> StepLine:
        # every field of the step (a new one that this line lacks fails here: extra="forbid")
        return cls(**dataclasses.asdict(step))


class FaultsFile(Saved):
    """faults.json: what was injected, with its seeded parts and confirmation."""

    faults: list[InjectedFault]


class RewardCheck(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    passed: bool
    scored: bool
    detail: str


class RewardFile(Saved):
    """reward.json of an episode directory: the structured reward (reward + checks)."""

    reward: float
    checks: list[RewardCheck]

    @classmethod
    def of(cls, verdict: Verdict) -> RewardFile:
        data: dict[str, Any] = verdict.reward_json()
        return cls(reward=data["reward"], checks=[RewardCheck(**c) for c in data["checks"]])
