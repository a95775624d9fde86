"""What crosses the OpenEnv wire: one action, one observation, the session's state."""

from __future__ import annotations

import shlex
from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..records.models import Diagnosed

DONE_COMMAND = "DONE"
"""the action that ends the episode early and asks for the verifier's final score."""


class FixOSAction(Action):
    """One shell command, run as root in the episode's live host; or a report of what is
    wrong (docs/diagnosis.md), alone or with a command (with DONE: report, then end)."""

    command: str | None = Field(
        default=None, min_length=1, description="a bash command line, or DONE to end the episode"
    )
    args: list[str] = Field(
        default_factory=list, description="extra arguments, each shell-quoted and appended to command"
    )
    host: str | None = Field(
        default=None,
        description="the host to run on, by name, in a multi-host scenario (default: the one logged into)",
    )
    report: dict[str, Any] | str | None = Field(
        default=None,
        description='what is wrong, as docs/diagnosis.md says: {"healthy": false, "findings": [{"host", '
        '"component", "cause", "evidence"}]} (a JSON object or its text); graded when the episode ends, '
        "a later report replacing it",
    )

    @model_validator(mode="after")
    def _something(self) -> FixOSAction:
        if self.command is None and self.report is None:
            raise ValueError("command: give a command, a report, or both")
        if self.command is None and self.args:
            raise ValueError("args: given without a command")
        return self

    def command_line(self) -> str | None:
        """The command with its quoted args; None for a report alone."""
        if self.command is None:
            return None
        return " ".join([self.command, *(shlex.quote(a) for a in self.args)])


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProcessInfo(_View):
    pid: int
    user: str
    cpu_percent: float
    """share of one core since the previous observation."""
    memory_mb: float
    command: str


class ServiceInfo(_View):
    name: str
    status: str
    """"running" or "stopped", as `service NAME status` says."""


class DiskInfo(_View):
    mount: str
    size_mb: float
    used_mb: float
    used_percent: float
    inodes_used_percent: float


class FixOSObservation(Observation):
    """The command's result and the live host as a monitoring agent would see it."""

    command_output: str = ""
    exit_code: int | None = None
    """None at reset and for DONE; 124 when the command was killed at its timeout."""
    timed_out: bool = False
    processes: list[ProcessInfo] = Field(default_factory=list)
    services: list[ServiceInfo] = Field(default_factory=list)
    disks: list[DiskInfo] = Field(default_factory=list)
    resources: dict[str, float] = Field(default_factory=dict)
    """cpu_percent (all processes, of one core), memory_mb, memory_percent, disk_percent (fullest mount)."""
    history: list[str] = Field(default_factory=list)
    task_id: str = ""
    task_difficulty: str = ""
    instruction: str = ""
    task_score: float = 0.0
    """the verifier's reward for the host as it is now; the final score once done."""
    is_success_step: bool = False
    remaining_steps: int = 0
    report_error: str | None = None
    """the action's report did not parse: one line naming the field (the last good one is kept)."""
    diagnosis: Diagnosed | None = None
    """once done: the kept report graded against the injected faults (score, recall, precision,
    per_fault), beside the score; never added to it or to the step rewards."""


class FixOSState(State):
    task_id: str | None = None
    difficulty: str | None = None
    seed: int | None = None
    max_steps: int = 0
    remaining_steps: int = 0
    task_score: float = 0.0
    done: bool = False
    solved: bool = False
    final_score: float | None = None
    """the verifier's reward once the episode is done (solved, DONE, or out of budget)."""
    containers: list[str] = Field(default_factory=list)
    """names of the live containers, while the episode holds them."""
    level: int | None = None
    """the generated world's level when ``reset(level=...)`` chose it"""
    curriculum: str | None = None
    """why that level: start, up, down, hold (``level="auto"``) or fixed"""
    task: str = "repair"
    """the task level (``fixos.episodes.tasks``): at diagnose, localise or detect the final score
    is the report's grade, 0.0 if the agent changed anything"""
    diagnosis: Diagnosed | None = None
    """once done: the kept report's grade (``FixOSObservation.diagnosis``)."""
