"""An episode's page: what the agent was told, what it ran and saw, the verdict check by
check (scored checks and gates, as left and after the restarts), the faults injected, what it
changed on disk when the record holds that, and what each phase cost."""

from __future__ import annotations

import json
import time
from typing import Any

from ...core.models import CheckResult
from ...records.models import FileChange, HostDisk
from .markup import cell, definitions, document, esc, folded, number, reward_class, table
from .page import PAGE, EpisodePage
from .redact import redact

AS_LEFT, AFTER_RESTARTS = "as_left", "after_restarts"
"""the final verdict's phases (``fixos.episodes.durability``), as records name them."""


def h2(anchor: str, title: str) -> str:
    """A section's heading (``title`` is markup), ``#s-<anchor>`` for the page's contents line."""
    return f'<h2 id="s-{anchor}">{title}</h2>'


def _json(value: Any) -> str:
    return esc(json.dumps(value, sort_keys=True, default=str))


def _passed(passed: bool | None) -> str:
    if passed is None:
        return cell("-", sort="", cls="muted")
    return cell("pass" if passed else "FAIL", sort=int(passed), cls="pass" if passed else "fail")


def header(page: EpisodePage) -> str:
    r = page.record
    reward = esc(r.status) if r.reward is None else esc(number(r.reward))
    control = ", a control: nothing broken" if r.control else ""
    facts = [
        ("scenario", esc(f"{r.scenario} ({r.difficulty}){control}")),
        ("agent, seed, task", esc(f"{r.agent}, seed {r.seed}, {r.task}")),
        ("status", f'<span class="{"invalid" if not r.scored else ""}">{esc(r.status)}</span>'),
        (
            "reward",
            f'<span class="{reward_class(r.reward)}">{reward}</span>{" (solved)" if r.solved else ""}',
        ),
    ]
    if r.diagnosis is not None:
        d = r.diagnosis
        said = esc(f"{number(d.score)} (recall {number(d.recall)}, precision {number(d.precision)})")
        said += esc(f", from {d.source}") + (f' <span class="fail">{esc(d.error)}</span>' if d.error else "")
        facts.append(("diagnosis", said))
    if r.failure is not None:
        facts.append(("failure", f'<span class="fail">{esc(r.failure.kind)}</span>: {esc(r.failure.detail)}'))
        if r.failure.script is not None:
            facts.append(("script", esc(r.failure.script.describe()) + folded(r.failure.script.output)))
    if r.engine:
        facts.append(("engine", esc(r.engine)))
    back = f'<p><a href="../{PAGE}">&larr; run {esc(r.run_id)}</a></p>'
    disk = '<a href="#s-changes">changes on disk</a> · ' if r.disk is not None else ""
    return back + f"<h1>Episode {esc(r.episode_id)}</h1>" + definitions(facts) + CONTENTS.format(disk=disk)


CONTENTS = (
    '<p class="small">On this page: <a href="#s-instruction">instruction</a> · <a href="#s-transcript">'
    'transcript</a> · <a href="#s-verdict">verdict</a> · <a href="#s-faults">faults</a> · {disk}'
    '<a href="#s-costs">phase costs</a></p>'
)


def instruction(page: EpisodePage) -> str:
    said = (
        f"<pre>{esc(page.instruction)}</pre>"
        if page.instruction is not None
        else '<p class="muted">Not known: the scenario is not in the catalogue the page was written with.</p>'
    )
    return h2("instruction", "Instruction") + said


def transcript(page: EpisodePage) -> str:
    if page.unreadable:
        return (
            h2("transcript", "Transcript") + f'<p class="fail">Could not be read: {esc(page.unreadable)}</p>'
        )
    if not page.steps:
        return h2("transcript", "Transcript") + '<p class="muted">No command was run.</p>'
    start = page.steps[0].started_at
    parts = []
    for s in page.steps:
        status = "timed out" if s.timed_out else f"exit {s.exit_code}"
        when = time.strftime("%H:%M:%S UTC", time.gmtime(s.started_at))
        ok = s.exit_code == 0 and not s.timed_out
        head = (
            f'<span class="small" title="{esc(when)}">[{esc(s.index)}] +{s.started_at - start:.1f} s</span> '
            f'<span class="{"pass" if ok else "fail"}">{esc(status)}</span> '
            f'<span class="small">· {s.duration * 1000:.0f} ms</span>'
        )
        output = folded(s.output, "output") if s.output else '<p class="small muted">(no output)</p>'
        nonzero = "" if ok else " nonzero"
        parts.append(
            f'<div class="step{nonzero}" id="step-{esc(s.index)}"><div>{head}</div>'
            f'<pre class="cmd">$ {esc(s.command)}</pre>{output}</div>'
        )
    return h2("transcript", f"Transcript: {len(page.steps)} command(s)") + "".join(parts)


def _check_rows(checks: list[CheckResult], phases: dict[str, list[CheckResult]]) -> list[str]:
    by_phase = {phase: {c.name: c for c in results} for phase, results in phases.items()}
    rows = []
    for c in checks:
        judged = [by_phase[p].get(c.name) if p in by_phase else None for p in (AS_LEFT, AFTER_RESTARTS)]
        cells = [
            cell(esc(c.name)),
            cell(esc(c.type)),
            cell(esc(f"{c.weight:g}"), cls="num"),
            *(_passed(None if j is None else j.passed) for j in judged),
            _passed(c.passed),
            cell(esc(c.detail)),
        ]
        # a failed check's whole row is red; a passed one stays quiet, its result cell green
        rows.append(f'<tr class="{"ok" if c.passed else "fail"}">{"".join(cells)}</tr>')
    return rows


def verdict(page: EpisodePage) -> str:
    v = page.record.verdict
    if v is None:
        return h2("verdict", "Verdict") + '<p class="invalid">Not judged: the episode was not scored.</p>'
    heads: list[str | tuple[str, str]] = [
        "check", "type", ("weight", "num"), "as left", "after restarts", "result", "detail",
    ]  # fmt: skip
    scored = [c for c in v.checks if c.scored]
    gates = [c for c in v.checks if not c.scored]
    failed = sum(not c.passed for c in v.checks)
    parts = [
        h2(
            "verdict",
            f'Verdict: reward <span class="{reward_class(v.reward)}">{esc(number(v.reward))}</span>',
        ),
        f'<p class="small">{len(scored)} scored check(s), {len(gates)} gate(s), {failed} failed. The '
        "reward is the weighted share of scored checks that pass, 0 when any gate fails. "
        + (
            "Each check was judged as the agent left the hosts and again after every service restarted."
            if v.phases
            else "Judged once."
        )
        + "</p>",
        "<h3>Scored checks</h3>",
        table("scored-checks", heads, _check_rows(scored, v.phases)) if scored else "<p>None.</p>",
        "<h3>Gates</h3>",
        table("gates", heads, _check_rows(gates, v.phases)) if gates else "<p>None.</p>",
    ]
    if v.restarts:
        rows = [f"<tr>{cell(esc(name))}{cell(esc(how))}</tr>" for name, how in sorted(v.restarts.items())]
        parts += ["<h3>Restarts between the phases</h3>", table("restarts", ["service", "how it went"], rows)]
    return "".join(parts)


def faults(page: EpisodePage) -> str:
    r = page.record
    if not r.faults:
        return (
            h2("faults", "Faults injected")
            + f'<p class="muted">None{": a control" if r.control else ""}.</p>'
        )
    rows = [
        f"<tr>{cell(esc(f.type))}{cell(esc(f.host))}{cell(_json(f.params))}{cell(_json(f.seeded))}"
        f"{cell(esc(f.confirmation))}</tr>"
        for f in r.faults
    ]
    heads = ["type", "host", "parameters", "drawn from the seed", "confirmed by"]
    families = ", ".join(r.families)
    note = f'<p class="small">Families: {esc(families)}</p>' if families else ""
    return h2("faults", "Faults injected") + note + table("faults", heads, rows)


def diagnosis(page: EpisodePage) -> str:
    d = page.record.diagnosis
    if d is None or not d.per_fault:
        return ""
    rows = [f"<tr>{cell(_json(item))}</tr>" for item in d.per_fault]
    return h2("diagnosis", "Diagnosis per fault") + table("diagnosis", ["match"], rows, sortable=False)


def _diff(text: str, what: str) -> str:
    """A unified diff in a <pre>, each line coloured by what it does (added, removed, a hunk)."""
    lines = []
    for line in redact(text).split("\n"):  # whole first: a key split over lines is still one key
        kind = (
            "head"
            if line.startswith(("+++ ", "--- "))
            else {"+": "add", "-": "del", "@": "hunk"}.get(line[:1])
        )
        lines.append(f'<span class="{kind}">{esc(line)}</span>' if kind else esc(line))
    return f'<p class="small">{esc(what)}</p><pre class="diff">' + "\n".join(lines) + "</pre>"


def _by(change: FileChange, marked: bool) -> str:
    said = [who for who, did in (("agent", change.agent), ("faults", change.faults)) if did]
    return ", ".join(said) or ("boot" if marked else "-")


def _host_disk(host: HostDisk) -> str:
    mine = sum(f.agent for f in host.files)
    others = len(host.files) - mine
    summary = f"{host.host}: {mine} path(s) changed by the agent, {others} other(s) unlike the image"
    parts = [f'<p class="muted">{esc(host.note)}</p>'] if host.note else []
    rows = [
        f'<tr class="{"agent" if f.agent else ""}">{cell(esc(f.path))}{cell(esc(f.kind))}'
        f"{cell(esc(_by(f, host.marked)))}{cell(esc(f.what))}</tr>"
        for f in host.files
    ]
    if rows:
        heads = ["path", "against the image", "changed by", "what"]
        parts.append(table(f"disk-files-{host.host}", heads, rows))
    for f in host.files:
        diffs = []
        if f.agent_diff:
            diffs.append(_diff(f.agent_diff, "the agent's change: as confirmed broken -> as left"))
        if f.diff:
            diffs.append(_diff(f.diff, "against the image (the healthy host): as left"))
        if diffs:
            parts.append(f'<div class="file"><h4>{esc(f.path)}</h4>{"".join(diffs)}</div>')
    head = f'<details class="disk" id="disk-{esc(host.host)}"><summary>{esc(summary)}</summary>'
    return head + "".join(parts) + "</details>"


def changes(page: EpisodePage) -> str:
    disk = page.record.disk
    if disk is None:
        return ""
    return (
        h2("changes", "What the agent changed on disk")
        + '<p class="small">Per host, each path it held otherwise than its image when the agent stopped '
        "(the trees the host writes on its own left out). <b>changed by</b>: <i>agent</i> after the faults "
        "were confirmed, <i>faults</i> while they went in, <i>boot</i> the host's own setup (not diffed). "
        "Diffs are against the image; the agent's own diff is added where the faults had changed the file "
        "first. Private keys and password hashes are redacted; key files show their sizes only.</p>"
        + "".join(_host_disk(host) for host in disk)
    )


def costs(page: EpisodePage) -> str:
    r, t = page.record, page.record.timings
    rows = [
        ("reset", t.reset, "asking for hosts until the fault is confirmed (boot included)"),
        ("boot", t.boot, "the part of reset spent getting booted hosts"),
        ("agent", t.agent, f"the agent's turn: {r.steps} command(s)"),
        ("verify", t.verify, "the final verdict, restarts included"),
        ("wall", t.wall, "reset + agent + verify"),
    ]
    body = [f"<tr>{cell(esc(n))}{cell(esc(number(s)), cls='num')}{cell(esc(w))}</tr>" for n, s, w in rows]
    step = cell(esc(number(t.step_mean * 1000, 1)) + " ms", cls="num")
    body.append(f"<tr>{cell('mean step')}{step}{cell('latency of one command')}</tr>")
    heads: list[str | tuple[str, str]] = ["phase", ("seconds", "num"), "what"]
    return h2("costs", "Phase costs") + table("costs", heads, body, sortable=False)


def render_episode(page: EpisodePage) -> str:
    sections = [header, instruction, transcript, verdict, diagnosis, faults, changes, costs]
    body = "".join(section(page) for section in sections)
    return document(f"FixOS {page.record.episode_id}", body)
