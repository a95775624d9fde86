"""What a bench run adds up to, written out: summary.json, junit.xml, and report.md
with a chart."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .models import EpisodeRecord
from .saved import write_model
from .summary import Stats, Summary, summarize


def junit_xml(run_id: str, records: Sequence[EpisodeRecord]) -> str:
    """One testcase per episode: failure when not solved, error when invalid."""
    suite = ET.Element(
        "testsuite",
        name=f"fixos-{run_id}",
        tests=str(len(records)),
        failures=str(sum(r.scored and not r.solved for r in records)),
        errors=str(sum(not r.scored for r in records)),
        time=f"{sum(r.timings.wall for r in records):.3f}",
    )
    for r in records:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"fixos.{r.agent}.{r.scenario}",
            name=r.episode_id,
            time=f"{r.timings.wall:.3f}",
        )
        if not r.scored:
            ET.SubElement(case, "error", message=r.error or "invalid episode").text = r.error or ""
        elif not r.solved:
            failed = [c for c in (r.verdict.checks if r.verdict else []) if not c.passed]
            text = "\n".join(f"{c.name}: {c.detail}" for c in failed)
            ET.SubElement(case, "failure", message=f"reward {r.reward}").text = text
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")
"""one per agent, in turn (Tableau's 10, which reads well printed and on screen)."""


def chart(summary: Summary, path: Path) -> None:
    """Bar chart of mean reward per scenario, one bar per agent, as SVG written by hand: a
    browser, GitHub and the run page show it, and it costs a millisecond where a plotting
    library cost ~1.7 CPU-s a run (most of it importing itself)."""
    scenarios, agents = list(summary.scenarios), summary.agents
    slot, left, top, plot_h = 28.0, 48.0, 28.0, 180.0
    width = left + slot * len(scenarios) + 150
    height = top + plot_h + 90
    bar = (slot - 6) / max(1, len(agents))
    svg = ET.Element(
        "svg", xmlns="http://www.w3.org/2000/svg", width=f"{width:.0f}", height=f"{height:.0f}",
        viewBox=f"0 0 {width:.0f} {height:.0f}", attrib={"font-family": "sans-serif", "font-size": "11"},
    )  # fmt: skip
    ET.SubElement(svg, "title").text = f"FixOS run {summary.run_id}: mean reward per scenario"
    ET.SubElement(
        svg, "text", x=f"{left:.0f}", y="16", attrib={"font-size": "13"}
    ).text = f"FixOS run {summary.run_id}"
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = top + plot_h * (1 - tick)
        ET.SubElement(svg, "line", x1=f"{left:.0f}", x2=f"{left + slot * len(scenarios):.0f}", y1=f"{y:.1f}",
                      y2=f"{y:.1f}", stroke="#ddd")  # fmt: skip
        ET.SubElement(
            svg, "text", x=f"{left - 6:.0f}", y=f"{y + 4:.1f}", attrib={"text-anchor": "end"}
        ).text = f"{tick:g}"
    label = ET.SubElement(
        svg, "text", x="12", y=f"{top + plot_h / 2:.0f}", transform=f"rotate(-90 12 {top + plot_h / 2:.0f})"
    )
    label.set("text-anchor", "middle")
    label.text = "mean reward"
    for i, sid in enumerate(scenarios):
        x0 = left + slot * i + 3
        for j, agent in enumerate(agents):
            value = summary.scenarios[sid].agents[agent].mean_reward
            h = plot_h * (value or 0)
            rect = ET.SubElement(svg, "rect", x=f"{x0 + j * bar:.1f}", y=f"{top + plot_h - h:.1f}")
            rect.attrib.update(width=f"{bar:.1f}", height=f"{h:.1f}", fill=COLOURS[j % len(COLOURS)])
            rect.set("data-scenario", sid)
            rect.set("data-agent", agent)
            ET.SubElement(rect, "title").text = f"{sid}, {agent}: " + (
                "invalid" if value is None else f"{value:g}"
            )
        x = x0 + (slot - 6) / 2
        name = ET.SubElement(svg, "text", x=f"{x:.1f}", y=f"{top + plot_h + 10:.0f}",
                             transform=f"rotate(45 {x:.1f} {top + plot_h + 10:.0f})")  # fmt: skip
        name.text = sid
    for j, agent in enumerate(agents):
        y = top + 14 * j
        legend_x = left + slot * len(scenarios) + 12
        ET.SubElement(
            svg,
            "rect",
            x=f"{legend_x:.0f}",
            y=f"{y:.0f}",
            width="10",
            height="10",
            fill=COLOURS[j % len(COLOURS)],
        )
        ET.SubElement(svg, "text", x=f"{legend_x + 14:.0f}", y=f"{y + 9:.0f}").text = agent
    path.write_text(ET.tostring(svg, encoding="unicode") + "\n", encoding="utf-8")


def dash(value: Any) -> str:
    return "-" if value is None else f"{value:g}"


def _cell(stats: Stats) -> str:
    if stats.mean_reward is None:
        return "invalid" if stats.episodes else "-"
    said = "" if stats.mean_diagnosis is None else f", diagnosis {stats.mean_diagnosis:.2f}"
    return f"{stats.mean_reward:.2f} ({stats.solved_pct:.0f}% solved{said})"


def markdown(summary: Summary, chart_name: str | None) -> str:
    agents = summary.agents
    lines = [f"# FixOS run {summary.run_id}", "", f"{summary.episodes} episode(s).", ""]
    if chart_name:
        lines += [f"![mean reward per scenario]({chart_name})", ""]
    lines += ["## By difficulty", "", "| difficulty | " + " | ".join(agents) + " |"]
    lines.append("| --- " * (len(agents) + 1) + "|")
    for d, per_agent in summary.difficulties.items():
        lines.append(f"| {d} | " + " | ".join(_cell(per_agent[a]) for a in agents) + " |")
    if summary.families:
        lines += ["", "## By fault family", "", "An episode counts in each family its faults belong to.", ""]
        lines += ["| family | " + " | ".join(agents) + " |", "| --- " * (len(agents) + 1) + "|"]
        for family, per_agent in summary.families.items():
            lines.append(f"| {family} | " + " | ".join(_cell(per_agent[a]) for a in agents) + " |")
    lines += ["", "## By scenario", ""]
    head = ["scenario", "difficulty"] + [f"{a}: reward (solved)" for a in agents]
    head += [f"{a}: steps / wall s / repair s" for a in agents]
    lines += ["| " + " | ".join(head) + " |", "| --- " * len(head) + "|"]
    for sid, row in summary.scenarios.items():
        stats = [row.agents[a] for a in agents]
        timing = [f"{s.mean_steps} / {s.mean_wall_s} / {dash(s.mean_time_to_repair_s)}" for s in stats]
        lines.append(f"| {sid} | {row.difficulty} | " + " | ".join([_cell(s) for s in stats] + timing) + " |")
    if summary.oracle_failures:
        lines += ["", "**Broken scenarios** (oracle below 1.0): " + ", ".join(summary.oracle_failures)]
    return "\n".join(lines) + "\n"


def write_reports(directory: Path, run_id: str, records: Sequence[EpisodeRecord]) -> Summary:
    summary = summarize(run_id, records)
    write_model(directory / "summary.json", summary)
    (directory / "junit.xml").write_text(junit_xml(run_id, records))
    chart_name = None
    if summary.scenarios:
        chart(summary, directory / "scores.svg")
        chart_name = "scores.svg"
    (directory / "report.md").write_text(markdown(summary, chart_name))
    return summary
