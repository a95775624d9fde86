"""The data that crosses module boundaries, typed once.

Scenario files are validated with pydantic (``fixos.scenarios.schema``); the files a run
saves are versioned models in ``fixos.records``, which hold these dataclasses.
"""

from __future__ import annotations

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
    """container port -> the port this machine reaches it at, on ``address``."""
    address: str = "127.0.0.1"
    """where this machine reaches those ports: 127.0.0.1 where the engine published them,
    the host's own address on a bridge of this machine (``fixos.stack.tunnel``)."""


@dataclass(frozen=True)
class HttpResponse:
    """An HTTP answer seen from outside the container; status 0 when nothing answered."""

    status: int
    body: bytes
    error: str = ""
    timed_out: bool = False
    """nothing answered in time (a slow page, not a refused or reset connection)."""


@dataclass(frozen=True)
class HostProcess:
    """One process of a host as ``ps -e -o pid,ppid,stat,args`` in its PID namespace shows
    it, with its executable (``/proc/<pid>/exe``; "" when unreadable)."""

    pid: int
    ppid: int
    """0 for a process whose parent is outside the host (its init, an engine exec)."""
    state: str
    """the kernel's one letter (``R``, ``S``, ``Z``...)."""
    comm: str
    args: str
    """the command line joined by spaces; ``[comm]`` when empty, ``[comm] <defunct>`` for a zombie."""
    exe: str
    cmdline: str = ""
    """the command line as it is, its arguments joined by spaces (no ``[comm]``, no ``?``)."""


@dataclass(frozen=True)
class Connection:
    """One TCP connection of a network namespace as its kernel's TCP sees it."""

    local: str
    remote: str
    state: int
    """``TCP_ESTABLISHED`` 1, ``TCP_SYN_SENT`` 2, ... (``include/net/tcp_states.h``)."""
    inode: int
    retransmits: int
    """times the retransmission timer fired since the last ACK: >= 1, the oldest packet in
    flight was given up for lost at least once and is still unanswered."""
    unacked: int
    """packets sent and not acknowledged (a SYN counts)."""
    since_sent_ms: int
    """milliseconds since new data was last sent."""
    since_ack_ms: int
    """milliseconds since an ACK last came."""
    timer_ms: int = 0
    """how long the retransmission timer has run (its time-out less what is left of it): for a
    SYN not yet sent again, how long it has waited; 0 when no such timer is pending."""


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
class ScriptFailure:
    """Where a reference repair (a solution script) stopped: the oracle's own account,
    kept in the episode's record so that a scenario's author sees why it scored low."""

    exit_code: int
    """the script's exit status (124: killed at its timeout)."""
    line: int | None
    """the script's line (from 1) whose command failed; None when bash named none
    (an ``exit N``, an unset variable, a timeout)."""
    text: str
    """that line as the script spells it (rendered), or empty."""
    output: str
    """the last lines the script printed."""

    def describe(self) -> str:
        where = (
            f"solution line {self.line} (`{self.text.strip()}`)" if self.line is not None else "the solution"
        )
        how = "was killed at its timeout" if self.exit_code == 124 else f"exited {self.exit_code}"
        return f"{where} {how}"


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
    failed_in: str = ""
    """in the final verdict, the phase it failed in: ``as_left``, ``after_restarts`` or
    ``both`` (``fixos.episodes.durability``); empty when it passed or was judged once."""


@dataclass(frozen=True)
class Verdict:
    reward: float
    checks: list[CheckResult]
    """the results that count: in the final verdict, each passed only if it passed in every phase."""
    phases: dict[str, list[CheckResult]] = field(default_factory=dict)
    """the final verdict's results per phase (``as_left``, ``after_restarts``); empty for a
    verdict judged once (the running score). Records without it read as judged once."""
    restarts: dict[str, str] = field(default_factory=dict)
    """``host/service`` -> how its restart between the phases went."""

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
