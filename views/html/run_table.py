"""The run's page: agents x scenarios rewards, pass rates per agent, invalid episodes with
their reason, phase timings, the plots. Each episode links to its own page."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable

from ...records.models import EpisodeRecord
from ...records.summary import summarize
from .markup import cell, definitions, document, esc, folded, href, number, reward_class, table
from .page import PAGE, Running, RunPage

REFRESH_SECONDS = 15
"""how often a page of a run still going reloads itself (filter and sort survive a reload)."""


def _link(episode_id: str, text: str) -> str:
    return f'<a href="{href(episode_id, PAGE)}">{text}</a>'


def _when(unix: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(unix))


def _agents(page: RunPage) -> list[str]:
    named = [r.agent for r in page.records] + [r.agent for r in page.running]
    named += [r.agent for r in page.interrupted] + (page.plan.agents if page.plan else [])
    return sorted(set(named))


def _rows(page: RunPage) -> list[tuple[str, int]]:
    """(scenario, seed) in the plan's order, then whatever else the run holds."""
    keys: list[tuple[str, int]] = []
    if page.plan is not None:
        keys = [(s, seed) for s in page.plan.scenarios for seed in page.plan.seeds]
    found = [(r.scenario, r.seed) for r in [*page.records, *page.interrupted]]
    found += [(r.scenario, r.seed) for r in page.running]
    return list(dict.fromkeys([*keys, *found]))


def _result_cell(record: EpisodeRecord) -> str:
    if not record.scored:
        return cell(_link(record.episode_id, esc(record.status)), sort="", cls="invalid")
    text = esc(number(record.reward))
    if record.diagnosis is not None:
        text += f' <span class="small">diagnosis {esc(number(record.diagnosis.score))}</span>'
    return cell(_link(record.episode_id, text), sort=record.reward, cls=reward_class(record.reward))


def results(page: RunPage) -> str:
    agents = _agents(page)
    done = {(r.scenario, r.seed, r.agent): r for r in page.records}
    stopped = {(r.scenario, r.seed, r.agent): r for r in page.interrupted}
    running = {(r.scenario, r.seed, r.agent): r for r in page.running}
    difficulty = {r.scenario: r.difficulty for r in [*page.records, *page.interrupted]}
    rows = []
    for scenario, seed in _rows(page):
        cells = [cell(esc(scenario)), cell(esc(difficulty.get(scenario, ""))), cell(esc(seed), cls="num")]
        for agent in agents:
            key = (scenario, seed, agent)
            if key in done:
                cells.append(_result_cell(done[key]))
            elif key in running:
                cells.append(cell(f"running · step {running[key].steps}", sort="", cls="running"))
            elif key in stopped:
                cells.append(cell("interrupted", sort="", cls="invalid"))
            else:
                cells.append(cell("-", sort="", cls="muted"))
        rows.append(f"<tr>{''.join(cells)}</tr>")
    heads: list[str | tuple[str, str]] = ["scenario", "difficulty", ("seed", "num"), *agents]
    return (
        "<h2>Rewards: scenarios x agents</h2>"
        '<p class="small">Reward of each episode (1.00 solved; diagnosis: the report\'s grade, where '
        "the agent gave one). Click a reward for the episode; click a header to sort.</p>"
        + table("results", heads, rows, filterable=True)
    )


def pass_rates(page: RunPage) -> str:
    summary = summarize(page.run_id, page.records)
    rows = []
    for agent in summary.agents:
        st = summary.overall[agent]
        mine = [r for r in page.records if r.agent == agent]
        solved = sum(r.solved for r in mine)
        cells = [
            cell(esc(agent)),
            cell(esc(st.episodes), cls="num"),
            cell(esc(st.episodes - st.invalid), cls="num"),
            cell(esc(solved), cls="num"),
            cell(
                esc(number(st.solved_pct, 0) + ("" if st.solved_pct is None else " %")),
                sort=st.solved_pct,
                cls="num",
            ),
            cell(esc(number(st.mean_reward)), sort=st.mean_reward, cls="num"),
            cell(esc(number(st.mean_diagnosis)), sort=st.mean_diagnosis, cls="num"),
            cell(esc(st.invalid), cls="num invalid" if st.invalid else "num"),
        ]
        rows.append(f"<tr>{''.join(cells)}</tr>")
    heads = ["agent", "episodes", "scored", "solved", "pass rate", "mean reward", "mean diagnosis", "invalid"]
    note = '<p class="small">Pass rate: solved over scored episodes; invalid ones are the harness\'s.</p>'
    return "<h2>Pass rates per agent</h2>" + note + table("pass-rates", heads, rows)


def invalid(page: RunPage) -> str:
    bad = [r for r in page.records if not r.scored] + page.interrupted
    if not bad:
        return '<h2>Invalid episodes</h2><p class="muted">None: every episode was scored.</p>'
    journaled = {r.episode_id for r in page.records}  # only these have a page to link to
    rows = []
    for r in bad:
        kind = r.failure.kind if r.failure else r.status
        link = _link(r.episode_id, esc(r.episode_id)) if r.episode_id in journaled else esc(r.episode_id)
        detail = folded(r.failure.detail, "detail") if r.failure else ""
        rows.append(
            f"<tr>{cell(link)}{cell(esc(r.agent))}{cell(esc(r.status), cls='invalid')}"
            f"{cell(esc(kind))}{cell(detail)}</tr>"
        )
    heads = ["episode", "agent", "status", "kind", "reason"]
    return "<h2>Invalid episodes</h2>" + table("invalid", heads, rows, filterable=True)


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return statistics.fmean(values) if values else None


def timings(page: RunPage) -> str:
    """Per agent the mean of each phase, then every episode with its own."""
    phases = ("reset", "boot", "agent", "verify")
    per_agent = []
    for agent in sorted({r.agent for r in page.records}):
        scored = [r for r in page.records if r.agent == agent and r.scored]
        means = [_mean(getattr(r.timings, p) for r in scored) for p in phases]
        means.append(_mean(r.timings.wall for r in scored))
        cells = "".join(cell(esc(number(m)), sort=m, cls="num") for m in means)
        per_agent.append(f"<tr>{cell(esc(agent))}{cells}</tr>")
    heads: list[str | tuple[str, str]] = ["agent", *((f"{p} s", "num") for p in (*phases, "wall"))]
    rows = [_episode_row(r) for r in page.records] + [_running_row(r, page.written_at) for r in page.running]
    episode_heads: list[str | tuple[str, str]] = [
        "episode", "scenario", ("seed", "num"), "agent", "task", "status", ("reward", "num"),
        ("diagnosis", "num"), ("steps", "num"), ("reset s", "num"), ("boot s", "num"), ("agent s", "num"),
        ("verify s", "num"), ("wall s", "num"), ("step ms", "num"),
    ]  # fmt: skip
    return (
        "<h2>Phase timings</h2>"
        '<p class="small">Mean seconds over the scored episodes: reset (boot included: near 0 from '
        "a warm pool) until the fault is confirmed, the agent's turn, the verdict.</p>"
        + table("timings", heads, per_agent)
        + "<h3>Every episode</h3>"
        + table("episodes", episode_heads, rows, filterable=True)
    )


def _episode_row(r: EpisodeRecord) -> str:
    t = r.timings
    diagnosis = None if r.diagnosis is None else r.diagnosis.score
    status_class = "invalid" if not r.scored else reward_class(r.reward)
    cells = [
        cell(_link(r.episode_id, esc(r.episode_id))),
        cell(esc(r.scenario)),
        cell(esc(r.seed), cls="num"),
        cell(esc(r.agent)),
        cell(esc(r.task)),
        cell(esc(r.status), cls=status_class),
        cell(esc(number(r.reward)), sort="" if r.reward is None else r.reward, cls=f"num {status_class}"),
        cell(esc(number(diagnosis)), sort="" if diagnosis is None else diagnosis, cls="num"),
        cell(esc(r.steps), cls="num"),
        *(cell(esc(number(v)), cls="num") for v in (t.reset, t.boot, t.agent, t.verify, t.wall)),
        cell(esc(number(t.step_mean * 1000, 1)), cls="num"),
    ]
    return f"<tr>{''.join(cells)}</tr>"


def _running_row(r: Running, now: float) -> str:
    cells = [cell(esc(r.episode_id)), cell(esc(r.scenario)), cell(esc(r.seed), cls="num"), cell(esc(r.agent))]
    cells += [cell(""), cell("running", cls="running"), cell("-", sort=""), cell("-", sort="")]
    cells += [cell(esc(r.steps), cls="num"), *[cell("", sort="")] * 4]
    cells += [cell(esc(number(max(0.0, now - r.started_at))) + " so far", cls="num running"), cell("")]
    return f"<tr>{''.join(cells)}</tr>"


def plots(page: RunPage) -> str:
    if not page.plots:
        return ""
    figures = []
    for plot in page.plots:
        shown = (
            f'<img class="plot" alt="{esc(plot.name)}" src="{esc(plot.uri)}">'
            if plot.uri
            else f'<a href="{href(plot.name)}">{esc(plot.name)}</a> (too large to embed)'
        )
        figures.append(f"<figure>{shown}<figcaption class='small'>{esc(plot.name)}</figcaption></figure>")
    return "<h2>Plots</h2>" + "".join(figures)


def header(page: RunPage) -> str:
    invalid_count = sum(not r.scored for r in page.records)
    state = (
        f"finished, written {_when(page.written_at)}"
        if page.finished
        else f"in progress: {len(page.running)} running, written {_when(page.written_at)}; "
        f"this page reloads every {REFRESH_SECONDS} s"
    )
    facts = [
        ("state", f'<span class="{"" if page.finished else "running"}">{esc(state)}</span>'),
        (
            "episodes",
            esc(
                f"{len(page.records)} recorded, {invalid_count} invalid, {len(page.interrupted)} interrupted"
            ),
        ),
    ]
    if page.plan is not None:
        p = page.plan
        planned = f"{len(p.scenarios)} scenario(s) x {len(p.seeds)} seed(s) x {len(p.agents)} agent(s)"
        facts += [
            ("plan", esc(planned)),
            ("task, transport", esc(f"{p.task}, {p.transport}")),
        ]
        if p.shard:
            facts.append(("shard", esc(f"{p.shard[0]}/{p.shard[1]}")))
    if page.files:
        facts.append(("files", " · ".join(f'<a href="{href(name)}">{esc(name)}</a>' for name in page.files)))
    return f"<h1>FixOS run {esc(page.run_id)}</h1>" + definitions(facts)


FILTER = (
    '<p><label>Filter rows: <input id="filter" type="search" autocomplete="off" '
    'placeholder="words all in a row: scenario, agent, status..."></label> '
    '<span id="shown" class="small"></span></p>'
)


def render_run(page: RunPage) -> str:
    body = "".join(
        [header(page), FILTER, results(page), pass_rates(page), invalid(page), timings(page), plots(page)]
    )
    return document(
        f"FixOS run {page.run_id}", body, refresh_seconds=None if page.finished else REFRESH_SECONDS
    )
