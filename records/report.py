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


def chart(summary: Summary, path: Path) -> None:
    """Bar chart of mean reward per scenario, one bar per agent (matplotlib, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenarios = list(summary.scenarios)
    agents = summary.agents
    width = 0.8 / max(1, len(agents))
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(scenarios) + 2), 3.6))
    for i, agent in enumerate(agents):
        values = [summary.scenarios[s].agents[agent].mean_reward or 0 for s in scenarios]
        ax.bar([x + i * width for x in range(len(scenarios))], values, width, label=agent)
    ax.set_xticks([x + width * (len(agents) - 1) / 2 for x in range(len(scenarios))], scenarios, rotation=45)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean reward")
    ax.set_title(f"FixOS run {summary.run_id}")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def dash(value: Any) -> str:
    return "-" if value is None else f"{value:g}"


def _cell(stats: Stats) -> str:
    if stats.mean_reward is None:
        return "invalid" if stats.episodes else "-"
    return f"{stats.mean_reward:.2f} ({stats.solved_pct:.0f}% solved)"


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
        chart(summary, directory / "scores.png")
        chart_name = "scores.png"
    (directory / "report.md").write_text(markdown(summary, chart_name))
    return summary
