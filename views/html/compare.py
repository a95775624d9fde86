"""Two runs side by side (``fixos compare A B``): per scenario the mean reward in each, and
whether B did better, worse or the same; as a model, then as a page.

Two runs of one agent each (a model against its next version, or against the baseline)
are compared scenario by scenario whatever the agents are called; runs with several
agents are compared per scenario and agent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...records.models import EpisodeRecord
from ...records.summary import Summary, summarize
from .markup import cell, definitions, document, esc, number, table
from .run_table import FILTER

SAME_WITHIN = 0.005
"""a change smaller than this is "same": it does not show at two decimals."""


@dataclass(frozen=True)
class Compared:
    scenario: str
    agent: str
    """the agent (one-agent runs: ``A's name -> B's name``)."""
    difficulty: str
    a: float | None
    """mean reward in A over its scored episodes; None: none scored, or not in A."""
    b: float | None
    in_a: bool
    in_b: bool

    @property
    def change(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def verdict(self) -> str:
        if not self.in_a or not self.in_b:
            return "only in A" if self.in_a else "only in B"
        change = self.change
        if change is None:
            return "not scored"
        if abs(change) < SAME_WITHIN:
            return "same"
        return "better" if change > 0 else "worse"


@dataclass(frozen=True)
class Comparison:
    a_id: str
    b_id: str
    rows: list[Compared]

    def count(self, verdict: str) -> int:
        return sum(r.verdict == verdict for r in self.rows)


def _mean(summary: Summary, scenario: str, agent: str) -> tuple[bool, float | None]:
    row = summary.scenarios.get(scenario)
    stats = None if row is None else row.agents.get(agent)
    return stats is not None and stats.episodes > 0, None if stats is None else stats.mean_reward


def compare_runs(a_id: str, a: Sequence[EpisodeRecord], b_id: str, b: Sequence[EpisodeRecord]) -> Comparison:
    first, second = summarize(a_id, a), summarize(b_id, b)
    difficulty = {sid: row.difficulty for s in (second, first) for sid, row in s.scenarios.items()}
    scenarios = list(dict.fromkeys([*first.scenarios, *second.scenarios]))
    rows = []
    if len(first.agents) == 1 and len(second.agents) == 1:
        agent_a, agent_b = first.agents[0], second.agents[0]
        name = agent_a if agent_a == agent_b else f"{agent_a} -> {agent_b}"
        for sid in scenarios:
            in_a, mean_a = _mean(first, sid, agent_a)
            in_b, mean_b = _mean(second, sid, agent_b)
            rows.append(Compared(sid, name, difficulty[sid], mean_a, mean_b, in_a, in_b))
    else:
        for sid in scenarios:
            for agent in sorted(set(first.agents) | set(second.agents)):
                in_a, mean_a = _mean(first, sid, agent)
                in_b, mean_b = _mean(second, sid, agent)
                if in_a or in_b:
                    rows.append(Compared(sid, agent, difficulty[sid], mean_a, mean_b, in_a, in_b))
    return Comparison(a_id, b_id, rows)


VERDICTS = ("better", "worse", "same", "not scored", "only in A", "only in B")
CLASSES = {
    "better": "better",
    "worse": "worse",
    "not scored": "invalid",
    "only in A": "muted",
    "only in B": "muted",
}


def render_compare(comparison: Comparison) -> str:
    rows = []
    for r in comparison.rows:
        change = r.change
        shown = "-" if change is None else f"{change:+.2f}"
        highlight = CLASSES.get(r.verdict, "")
        cells = [
            cell(esc(r.scenario)),
            cell(esc(r.agent)),
            cell(esc(r.difficulty)),
            cell(esc(number(r.a)), sort="" if r.a is None else r.a, cls="num"),
            cell(esc(number(r.b)), sort="" if r.b is None else r.b, cls="num"),
            cell(esc(shown), sort="" if change is None else change, cls=f"num {highlight}"),
            cell(esc(r.verdict), cls=highlight),
        ]
        rows.append(f'<tr class="{highlight}">{"".join(cells)}</tr>')
    heads: list[str | tuple[str, str]] = [
        "scenario", "agent", "difficulty", ("A", "num"), ("B", "num"), ("B - A", "num"), "B is",
    ]  # fmt: skip
    counts = ", ".join(f"{comparison.count(v)} {v}" for v in VERDICTS)
    facts = [("A", esc(comparison.a_id)), ("B", esc(comparison.b_id)), ("B against A", esc(counts))]
    body = (
        f"<h1>FixOS: run {esc(comparison.b_id)} against {esc(comparison.a_id)}</h1>"
        + definitions(facts)
        + '<p class="small">Mean reward over each run\'s scored episodes of the scenario; a change '
        f"under {SAME_WITHIN:g} is the same.</p>" + FILTER + table("compare", heads, rows, filterable=True)
    )
    return document(f"FixOS compare {comparison.a_id} {comparison.b_id}", body)
