"""summary.json: what a run's episodes add up to per agent, scenario, difficulty and fault family,
and the comparison against an earlier summary that nightly CI relies on."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from .failures import FailureKind
from .models import EpisodeRecord
from .saved import Saved, read_model

DIFFICULTIES = ("easy", "medium", "hard")


class Stats(BaseModel):
    """One agent over some episodes; the means are over scored episodes only (None: none)."""

    model_config = ConfigDict(extra="forbid")

    episodes: int
    invalid: int
    """episodes not scored: the harness failed them."""
    failures: dict[FailureKind, int] = Field(default_factory=dict)
    """episodes per failure kind, the agent's own crashes (still scored) included."""
    mean_reward: float | None
    solved_pct: float | None
    mean_steps: float | None
    mean_wall_s: float | None
    mean_time_to_repair_s: float | None
    """mean agent time of the solved episodes."""
    mean_diagnosis: float | None = None
    """mean diagnosis (``fixos.diagnosis``) over the scored episodes where the agent gave a
    report (None: it gave none; a missing report is 0.0 only in the episode's own record)."""


class ScenarioSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    difficulty: str
    agents: dict[str, Stats]


class Summary(Saved):
    """summary.json of a run."""

    run_id: str
    agents: list[str]
    episodes: int
    overall: dict[str, Stats]
    """agent -> its stats over the whole run."""
    difficulties: dict[str, dict[str, Stats]]
    """difficulty -> agent -> stats."""
    scenarios: dict[str, ScenarioSummary]
    families: dict[str, dict[str, Stats]] = Field(default_factory=dict)
    """fault family -> agent -> stats over the episodes whose scenario has a fault of that
    family (an episode with faults of two families counts in both)."""
    oracle_failures: list[str]
    """episodes where the oracle was scored below 1.0: broken scenarios."""


def _mean(values: list[float], digits: int) -> float | None:
    return round(statistics.fmean(values), digits) if values else None


def stats(records: Sequence[EpisodeRecord]) -> Stats:
    valid = [r for r in records if r.scored]
    solved = [r for r in valid if r.solved]
    return Stats(
        episodes=len(records),
        invalid=len(records) - len(valid),
        failures=dict(Counter(r.failure.kind for r in records if r.failure is not None)),
        mean_reward=_mean([r.reward or 0.0 for r in valid], 4),
        solved_pct=round(100 * len(solved) / len(valid), 1) if valid else None,
        mean_steps=_mean([r.steps for r in valid], 1),
        mean_wall_s=_mean([r.timings.wall for r in valid], 2),
        mean_time_to_repair_s=_mean([r.timings.agent for r in solved], 2),
        mean_diagnosis=_mean(
            [r.diagnosis.score for r in valid if r.diagnosis is not None and r.diagnosis.source != "none"], 4
        ),
    )


def summarize(run_id: str, records: Sequence[EpisodeRecord]) -> Summary:
    agents = sorted({r.agent for r in records})
    scenarios: dict[str, ScenarioSummary] = {}
    for sid in dict.fromkeys(r.scenario for r in records):
        mine = [r for r in records if r.scenario == sid]
        scenarios[sid] = ScenarioSummary(
            difficulty=mine[0].difficulty,
            agents={a: stats([r for r in mine if r.agent == a]) for a in agents},
        )
    difficulties = {
        d: {a: stats([r for r in records if r.difficulty == d and r.agent == a]) for a in agents}
        for d in DIFFICULTIES
        if any(r.difficulty == d for r in records)
    }
    families = {
        f: {a: stats([r for r in records if f in r.families and r.agent == a]) for a in agents}
        for f in sorted({f for r in records for f in r.families})
    }
    return Summary(
        run_id=run_id,
        agents=agents,
        episodes=len(records),
        overall={a: stats([r for r in records if r.agent == a]) for a in agents},
        difficulties=difficulties,
        scenarios=scenarios,
        families=families,
        oracle_failures=sorted(
            r.episode_id for r in records if r.agent == "oracle" and r.scored and not r.solved
        ),
    )


def read_summary(path: Path) -> Summary:
    return read_model(Summary, path)


def compare(current: Summary, baseline: Summary, tolerance: float) -> list[str]:
    """Regressions of ``current`` against ``baseline``: one line each; empty when none."""
    problems = [f"broken scenario: oracle scored below 1.0 in {e}" for e in current.oracle_failures]
    for sid, row in baseline.scenarios.items():
        for agent, old in row.agents.items():
            now = current.scenarios.get(sid)
            new = None if now is None else now.agents.get(agent)
            if new is None or old.mean_reward is None:
                continue
            if new.mean_reward is None:
                problems.append(f"{sid} ({agent}): no valid episode now (was {old.mean_reward:.2f})")
            elif new.mean_reward < old.mean_reward - tolerance:
                problems.append(
                    f"{sid} ({agent}): mean reward {new.mean_reward:.2f} < {old.mean_reward:.2f} "
                    f"- {tolerance:g}"
                )
    return problems
