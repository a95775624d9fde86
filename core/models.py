"""The data that crosses module boundaries, typed once.

Scenario files are validated with pydantic (``fixos.scenarios.schema``); records the
harness produces are plain dataclasses serialised with ``to_json``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CommandResult:
    """What one command run through a Shell gave back."""

    command: str
    output: str
    """stdout and stderr as the terminal would show them, decoded leniently, capped."""
    exit_code: int
    """the command's exit status; 124 when FixOS killed it at its timeout."""
    duration: float
    """seconds from sending the command to reading its end."""
    timed_out: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class Step:
    """One agent command, as it happened."""

    index: int
    command: str
    output: str
    exit_code: int
    duration: float
    started_at: float
    """Unix time the command was sent."""
    timed_out: bool = False


@dataclass(frozen=True)
class HostHandle:
    """One live container of an episode, and how the host machine reaches it."""

    name: str
    container_id: str
    ports: dict[int, int]
    """container port -> port published on 127.0.0.1."""


@dataclass(frozen=True)
class HttpResponse:
    """An HTTP answer seen from outside the container; status 0 when nothing answered."""

    status: int
    body: bytes
    error: str = ""


@dataclass(frozen=True)
class InjectedFault:
    type: str
    host: str
    params: dict[str, Any]
    seeded: dict[str, Any]
    """the variable parts drawn from the episode's seed."""
    confirmation: str
    """what showed that the fault is really observable."""


@dataclass(frozen=True)
class Outcome:
    """What a check found: pass or fail, and the evidence."""

    passed: bool
    detail: str


@dataclass(frozen=True)
class CheckResult:
    name: str
    type: str
    passed: bool
    scored: bool
    weight: float
    detail: str


@dataclass(frozen=True)
class Verdict:
    reward: float
    checks: list[CheckResult]

    @property
    def solved(self) -> bool:
        return self.reward >= 1.0

    def reward_json(self) -> dict[str, Any]:
        """The InfraBench/Harbor structured-reward contract."""
        return {
            "reward": self.reward,
            "checks": [
                {"name": c.name, "passed": c.passed, "scored": c.scored, "detail": c.detail}
                for c in self.checks
            ],
        }


@dataclass
class Timings:
    reset: float = 0.0
    """seconds from asking for a host to the fault being confirmed."""
    boot: float = 0.0
    """the part of ``reset`` spent getting booted hosts (near 0 from a warm pool)."""
    agent: float = 0.0
    verify: float = 0.0
    step_mean: float = 0.0


@dataclass
class EpisodeRecord:
    """One finished (or invalid) episode, as written to episodes.jsonl."""

    run_id: str
    episode_id: str
    scenario: str
    difficulty: str
    seed: int
    agent: str
    status: str
    """"scored" or "invalid"."""
    reward: float | None
    solved: bool
    steps: int
    timings: Timings
    faults: list[InjectedFault] = field(default_factory=list)
    verdict: Verdict | None = None
    error: str | None = None
    images: dict[str, str] = field(default_factory=dict)
    """image tag -> image id of each host."""
    engine: str | None = None
    """the Docker engine it ran on, when a run spreads over several."""


def to_json(obj: Any) -> Any:
    """Dataclasses (nested) to JSON-ready data."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_json(v) for v in obj]
    return obj


def record_from_json(data: dict[str, Any]) -> EpisodeRecord:
    """An EpisodeRecord back from its episodes.jsonl line."""
    verdict = data.get("verdict")
    return EpisodeRecord(
        run_id=data["run_id"],
        episode_id=data["episode_id"],
        scenario=data["scenario"],
        difficulty=data["difficulty"],
        seed=data["seed"],
        agent=data["agent"],
        status=data["status"],
        reward=data["reward"],
        solved=data["solved"],
        steps=data["steps"],
        timings=Timings(**data["timings"]),
        faults=[InjectedFault(**f) for f in data.get("faults", [])],
        verdict=None
        if verdict is None
        else Verdict(reward=verdict["reward"], checks=[CheckResult(**c) for c in verdict["checks"]]),
        error=data.get("error"),
        images=data.get("images", {}),
        engine=data.get("engine"),
    )
