"""Calibration: how often agents that try solve generated worlds, level by level, with 95 %
Wilson intervals. Pure: records in, a table out (``fixos calibrate`` runs the episodes)."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
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


COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd")


def plot(table: list[Cell], title: str) -> str:
    """The table as an SVG written by hand (as the run's ``scores.svg``): the solve rate per
    level, a line per agent, each point with its 95 % interval as a whisker."""
    agents = list(dict.fromkeys(c.agent for c in table))
    levels = sorted({c.level for c in table})
    left, top, plot_w, plot_h = 56.0, 32.0, 90.0 * max(1, len(levels) - 1), 200.0
    width, height = left + plot_w + 190, top + plot_h + 56
    svg = ET.Element(
        "svg", xmlns="http://www.w3.org/2000/svg", width=f"{width:.0f}", height=f"{height:.0f}",
        viewBox=f"0 0 {width:.0f} {height:.0f}", attrib={"font-family": "sans-serif", "font-size": "11"},
    )  # fmt: skip
    ET.SubElement(svg, "title").text = title
    ET.SubElement(svg, "text", x=f"{left:.0f}", y="18", attrib={"font-size": "13"}).text = title

    def x_of(level: int) -> float:
        return left + (plot_w * levels.index(level) / (len(levels) - 1) if len(levels) > 1 else plot_w / 2)

    def y_of(rate: float) -> float:
        return top + plot_h * (1 - rate)

    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = y_of(tick)
        ET.SubElement(svg, "line", x1=f"{left:.0f}", x2=f"{left + plot_w:.0f}", y1=f"{y:.1f}", y2=f"{y:.1f}",
                      stroke="#ddd")  # fmt: skip
        ET.SubElement(
            svg, "text", x=f"{left - 6:.0f}", y=f"{y + 4:.1f}", attrib={"text-anchor": "end"}
        ).text = f"{tick:g}"
    for level in levels:
        ET.SubElement(svg, "text", x=f"{x_of(level):.1f}", y=f"{top + plot_h + 18:.0f}",
                      attrib={"text-anchor": "middle"}).text = f"level {level}"  # fmt: skip
    label = ET.SubElement(svg, "text", x="14", y=f"{top + plot_h / 2:.0f}",
                          transform=f"rotate(-90 14 {top + plot_h / 2:.0f})")  # fmt: skip
    label.set("text-anchor", "middle")
    label.text = "solved (reward 1.0)"
    by = {(c.level, c.agent): c for c in table}
    for j, agent in enumerate(agents):
        colour = COLOURS[j % len(COLOURS)]
        mine = [by[(level, agent)] for level in levels if (level, agent) in by and by[(level, agent)].n]
        points = " ".join(f"{x_of(c.level):.1f},{y_of(c.rate):.1f}" for c in mine)
        ET.SubElement(
            svg, "polyline", points=points, fill="none", stroke=colour, attrib={"stroke-width": "2"}
        )
        for c in mine:
            x, (lo, hi) = x_of(c.level) + 3 * j, c.interval
            whisker = {"x1": f"{x:.1f}", "x2": f"{x:.1f}", "y1": f"{y_of(lo):.1f}", "y2": f"{y_of(hi):.1f}"}
            ET.SubElement(svg, "line", attrib={**whisker, "stroke": colour})
            dot = ET.SubElement(svg, "circle", cx=f"{x:.1f}", cy=f"{y_of(c.rate):.1f}", r="3.5", fill=colour)
            dot.set("data-agent", agent)
            dot.set("data-level", str(c.level))
            ET.SubElement(
                dot, "title"
            ).text = f"{agent}, level {c.level}: {c.solved}/{c.n}, [{lo:.2f}, {hi:.2f}]"
        y = top + 16 * j
        ET.SubElement(
            svg, "rect", x=f"{left + plot_w + 16:.0f}", y=f"{y:.0f}", width="10", height="10", fill=colour
        )
        ET.SubElement(svg, "text", x=f"{left + plot_w + 30:.0f}", y=f"{y + 9:.0f}").text = agent
    return ET.tostring(svg, encoding="unicode") + "\n"
