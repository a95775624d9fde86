"""Calibration: how often agents that try solve generated worlds, level by level, with 95 %
Wilson intervals. Pure: records in, a table out (``fixos calibrate`` runs the episodes)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from ..records.models import EpisodeRecord
from ..scenarios.generator import VERSION, parse_id

Z95 = 1.959964


def wilson(solved: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``solved`` successes in ``n`` trials (0, 1 when n is 0)."""
    if n == 0:
        return 0.0, 1.0
    p = solved / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Cell:
    level: int
    agent: str
    n: int
    """scored episodes (an invalid one says nothing of the agent: counted apart)"""
    solved: int
    invalid: int
    mean_reward: float

    @property
    def rate(self) -> float:
        return self.solved / self.n if self.n else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.solved, self.n)


def cells(records: Iterable[EpisodeRecord]) -> list[Cell]:
    """One cell per level x agent, by level then agent (whatever order the episodes ended in)."""
    grouped: dict[tuple[int, str], list[EpisodeRecord]] = {}
    for record in records:
        level, _ = parse_id(record.scenario)
        grouped.setdefault((level, record.agent), []).append(record)
    out = []
    for (level, agent), group in sorted(grouped.items()):
        scored = [r for r in group if r.scored and r.reward is not None]
        rewards = [r.reward for r in scored if r.reward is not None]
        out.append(
            Cell(
                level=level,
                agent=agent,
                n=len(scored),
                solved=sum(1 for r in scored if r.solved),
                invalid=len(group) - len(scored),
                mean_reward=sum(rewards) / len(rewards) if rewards else 0.0,
            )
        )
    return out


def as_json(table: list[Cell]) -> dict[str, object]:
    return {
        "generator_version": VERSION,
        "cells": [{**asdict(c), "rate": c.rate, "interval95": list(c.interval)} for c in table],
    }


def markdown(table: list[Cell]) -> str:
    """Levels as rows, agents as columns: solved/n, the rate and its 95 % interval."""
    agents = list(dict.fromkeys(c.agent for c in table))
    levels = sorted({c.level for c in table})
    by = {(c.level, c.agent): c for c in table}
    lines = [
        "| level | " + " | ".join(agents) + " |",
        "| --- | " + " | ".join("---" for _ in agents) + " |",
    ]
    for level in levels:
        row = []
        for agent in agents:
            c = by.get((level, agent))
            if c is None:
                row.append("-")
                continue
            lo, hi = c.interval
            extra = f", {c.invalid} invalid" if c.invalid else ""
            row.append(f"{c.solved}/{c.n} = {c.rate:.2f} [{lo:.2f}, {hi:.2f}]{extra}")
        lines.append(f"| {level} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
