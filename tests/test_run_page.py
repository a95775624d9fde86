"""The run page (``fixos.views.html``) from records built here with the real models: what
the run page and an episode page hold, escaping of hostile agent output, redaction of
secrets, the comparison of two runs, the pages kept current during a run, and the
``view`` and ``compare`` commands. Fast: no container, no browser (the browser's view is
tests/test_run_page_browser.py)."""

from __future__ import annotations

import base64
import hashlib
import io
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from rich.console import Console
from run_page_data import (
    HOSTILE,
    INSTRUCTION,
    MYSQL_HASH,
    PEM,
    RUN_ID,
    SHADOW_HASH,
    make_run,
    record,
)

from fixos.bench.local import Events, Job
from fixos.cli.main import main
from fixos.core.models import Step
from fixos.records.models import FileChange, HostDisk
from fixos.records.rundir import RunDir
from fixos.views.html import (
    PAGE,
    EpisodePage,
    LivePage,
    PageWriter,
    Running,
    compare_runs,
    load_episode,
    load_run,
    redact,
    render_compare,
    render_episode,
    render_run,
)
from fixos.views.html.assets import CSP


def run_page(root: Path, running: list[Running] | None = None) -> str:
    page, _ = load_run(make_run(root).path, running=running or [], finished=running is None)
    return render_run(page)


def episode_page(root: Path, episode_id: str = "easy_1-s1-oracle") -> str:
    run = make_run(root)
    rec = next(r for r in run.records() if r.episode_id == episode_id)
    return render_episode(load_episode(run, rec, {"easy_1": INSTRUCTION}))


def row_of(page: str, table_id: str, first_cell: str) -> str:
    table = page[page.index(f'<table id="{table_id}"') :]
    table = table[: table.index("</table>")]
    return next(
        row for row in table.split("<tr") if f"<td>{first_cell}</td>" in row or f">{first_cell}<" in row
    )


# -- the run page ------------------------------------------------------------


def test_the_run_page_holds_rewards_per_scenario_and_agent_linked_to_each_episode(tmp_path: Path) -> None:
    page = run_page(tmp_path)
    row = row_of(page, "results", "easy_1")
    heads = re.findall(
        r"<th[^>]*>([^<]*)</th>", page[page.index('<table id="results"') :].split("</thead>")[0]
    )
    assert heads == ["scenario", "difficulty", "seed", "baseline", "oracle"]
    assert 'class="partial" data-sort="0.5"' in row and "0.50" in row and "diagnosis 0.80" in row
    assert 'class="pass" data-sort="1.0"' in row
    assert 'href="./easy_1-s1-oracle/index.html"' in row
    failed = row_of(page, "results", "medium_3")
    assert 'class="fail" data-sort="0.0"' in failed
    assert 'class="sortable filterable"' in page and 'id="filter"' in page


def test_the_run_page_gives_pass_rates_invalid_reasons_timings_and_plots(tmp_path: Path) -> None:
    page = run_page(tmp_path)
    baseline = row_of(page, "pass-rates", "baseline")
    # 3 scored, 1 solved: a pass rate of 33 %
    assert re.findall(r'<td class="num"[^>]*>([^<]*)</td>', baseline)[:4] == ["3", "3", "1", "33 %"]
    invalid = row_of(page, "invalid", '<a href="./hard_2-s1-oracle/index.html">hard_2-s1-oracle</a>')
    assert "boot_failed" in invalid and "the host did not boot in 60 s" in invalid
    timings = row_of(page, "timings", "oracle")
    assert "2.50" in timings and "3.25" in timings  # reset, agent
    assert page.count('<img class="plot"') == 2  # the report's scores.svg and a PNG
    assert 'src="data:image/png;base64,' in page and 'src="data:image/svg+xml;base64,' in page


def test_a_run_in_progress_shows_its_running_episodes_and_reloads(tmp_path: Path) -> None:
    page = run_page(
        tmp_path, [Running("hard_2-s1-baseline", "hard_2", 1, "baseline", time.time() - 5, steps=7)]
    )
    assert "running · step 7" in row_of(page, "results", "hard_2")
    assert '<meta http-equiv="refresh" content="15">' in page
    assert "in progress: 1 running" in page
    assert '<meta http-equiv="refresh"' not in run_page(tmp_path / "done")


def test_pages_need_nothing_from_the_network_and_only_their_own_script_runs(tmp_path: Path) -> None:
    for page in (run_page(tmp_path / "a"), episode_page(tmp_path / "b")):
        assert not re.search(r"(src|href)=\"(https?:)?//", page)
        assert "@import" not in page and "url(" not in page
        style = re.search(r"<style>(.*?)</style>", page, re.DOTALL)
        scripts = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
        assert style is not None and len(scripts) == 1  # the one inline script: the page's own
        for text in (style[1], scripts[0]):  # the CSP names each by its hash: nothing else may run
            digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
            assert f"'sha256-{digest}'" in CSP
        assert "default-src 'none'" in page


# -- an episode's page -------------------------------------------------------


def test_hostile_agent_output_is_text_on_the_page(tmp_path: Path) -> None:
    page = episode_page(tmp_path)
    assert HOSTILE not in page
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;window.__pwned = 2&quot;&gt;" in page
    assert page.count("<script>") == 1 and "<img" not in page


def test_an_episode_page_shows_instruction_transcript_faults_and_costs(tmp_path: Path) -> None:
    page = episode_page(tmp_path)
    assert f"<pre>{INSTRUCTION}</pre>" in page
    assert '<pre class="cmd">$ systemctl status nginx</pre>' in page
    assert '<span class="fail">exit 3</span>' in page and '<div class="step nonzero" id="step-0">' in page
    # the 40-line output is folded; the short ones are not
    assert "<details><summary>output: 40 lines" in page and page.count("<details>") == 1
    assert "service_stopped" in page and "&quot;pid&quot;: 909" in page and "nginx: exit 3" in page
    costs = page[page.index('<table id="costs"') :]
    assert "2.50" in costs and "0.40" in costs and "7.25" in costs and "31.0 ms" in costs
    assert '<a href="../index.html">' in page


def test_a_failed_check_is_marked_per_phase_and_gates_stand_apart(tmp_path: Path) -> None:
    page = episode_page(tmp_path, "easy_1-s1-baseline")
    site = row_of(page, "scored-checks", "site_up")
    assert site.startswith(' class="fail"')
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", site)
    assert cells[3:6] == ["pass", "FAIL", "FAIL"]  # as left, after restarts, the result
    assert "after the restarts: connection refused on :80" in site
    assert row_of(page, "scored-checks", "db_up").startswith(' class="ok"')
    assert "no_new_processes" in page[page.index('<table id="gates"') :]
    assert "web/nginx" in page and "diagnosis" in page and "0.80" in page


def test_an_invalid_episode_page_says_why(tmp_path: Path) -> None:
    page = episode_page(tmp_path, "hard_2-s1-oracle")
    assert "Not judged" in page and "boot_failed" in page and "did not boot" in page
    assert "Not known: the scenario is not in the catalogue" in page  # no instruction given for hard_2


# -- redaction ---------------------------------------------------------------


def test_secrets_are_redacted_from_transcripts() -> None:
    said = redact(f"root:{SHADOW_HASH}:19000:0:::\nshop {MYSQL_HASH}\n{PEM}\nafter")
    assert SHADOW_HASH not in said and MYSQL_HASH not in said and "MIIEvQ" not in said
    assert "root:$6$[password hash redacted]:19000" in said
    assert "shop *[password hash redacted]" in said
    assert "[private key redacted: PRIVATE KEY]\nafter" in said


@pytest.mark.parametrize(
    "secret",
    [
        "$y$j9T$F5Jx5fExrKuPp53xLKQ..1$X3DX6M94c7o.9agCG9G317fhZg9SqC.5i5rd.RhAtQ7",  # yescrypt
        "$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW",  # bcrypt
        "$apr1$abcdefgh$0123456789abcdefghijk",  # .htpasswd
        "$6$rounds=5000$saltsalt$" + "b" * 86,
        "*6BB4837EB74329105EE4568DDA7DC67ED2CA2AD9",
    ],
)
def test_each_kind_of_password_hash_is_redacted(secret: str) -> None:
    assert secret not in redact(f"x:{secret}:y") and "redacted" in redact(secret)


def test_keys_cut_short_and_of_every_kind_are_redacted() -> None:
    openssh = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----"
    )
    cut = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIDx1\nAoGCCqGSM49"
    assert redact(openssh) == "[private key redacted: OPENSSH PRIVATE KEY]"
    assert redact(cut) == "[private key redacted: EC PRIVATE KEY]"
    certificate = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    assert redact(certificate) == certificate  # public: left to read


def test_ordinary_text_is_left_alone() -> None:
    text = "echo $1$HOME; ls *.conf; price $6 each; *ABC; a$6$b"
    assert redact(text) == text


def test_what_the_agent_changed_on_disk_is_shown_per_host_redacted(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    rec = next(r for r in run.records() if r.disk)
    shadow = FileChange(
        path="/etc/shadow",
        kind="changed",
        agent=True,
        diff=f"--- image /etc/shadow\n+++ left /etc/shadow\n-root:{SHADOW_HASH}:1::\n+root:!:1::\n"
        f"+{PEM}\n<b>x</b>",
    )
    host = HostDisk(host="db", files=[shadow], note="<i>capped</i>")
    page = render_episode(EpisodePage(record=rec.model_copy(update={"disk": [*(rec.disk or []), host]})))
    assert "What the agent changed on disk" in page and 'href="#s-changes"' in page
    assert (
        '<details class="disk" id="disk-web"><summary>web: 1 path(s) changed by the agent, 1 other(s)' in page
    )
    assert '<span class="add">+    listen 80 default_server;</span>' in page
    assert '<span class="del">-    listen 8O;</span>' in page  # the agent's own diff, the faults' typo
    assert SHADOW_HASH not in page and "MIIEvQ" not in page and "&lt;b&gt;x&lt;/b&gt;" in page
    assert "&lt;i&gt;capped&lt;/i&gt;" in page
    bare = render_episode(EpisodePage(record=rec.model_copy(update={"disk": None})))
    assert "What the agent changed" not in bare and 'href="#s-changes"' not in bare


# -- compare -----------------------------------------------------------------


def test_compare_says_per_scenario_whether_b_did_better_worse_or_the_same() -> None:
    a = [record("easy_1", "m1", 1.0), record("easy_2", "m1", 0.5), record("easy_3", "m1", 0.5)]
    a += [record("only_a", "m1", 1.0)]
    b = [record("easy_1", "m2", 1.0), record("easy_2", "m2", 0.0), record("easy_3", "m2", 0.75)]
    b += [record("only_b", "m2", 0.0)]
    comparison = compare_runs("A", a, "B", b)
    verdicts = {r.scenario: r.verdict for r in comparison.rows}
    assert verdicts == {
        "easy_1": "same",
        "easy_2": "worse",
        "easy_3": "better",
        "only_a": "only in A",
        "only_b": "only in B",
    }
    assert {r.agent for r in comparison.rows} == {"m1 -> m2"}  # one agent each: compared whatever their names
    page = render_compare(comparison)
    assert row_of(page, "compare", "easy_2").startswith(' class="worse"')
    assert row_of(page, "compare", "easy_3").startswith(' class="better"')
    assert "-0.50" in row_of(page, "compare", "easy_2") and "+0.25" in row_of(page, "compare", "easy_3")
    assert "1 better, 1 worse, 1 same" in page


def test_compare_runs_of_several_agents_per_scenario_and_agent() -> None:
    a = [record("easy_1", "oracle", 1.0), record("easy_1", "nop", 0.0)]
    b = [record("easy_1", "oracle", 1.0), record("easy_1", "nop", None, failure=None)]
    rows = {(r.scenario, r.agent): r.verdict for r in compare_runs("A", a, "B", b).rows}
    assert rows == {("easy_1", "nop"): "not scored", ("easy_1", "oracle"): "same"}


# -- written during a run ----------------------------------------------------


class Heard(Events):
    def __init__(self) -> None:
        self.heard: list[str] = []

    def started(self, job: Job) -> None:
        self.heard.append(f"started {job.episode_id}")

    def finished(self, record, retried) -> None:  # type: ignore[no-untyped-def]
        self.heard.append(f"finished {record.episode_id}")


def test_the_page_follows_a_run_as_episodes_start_and_end(tmp_path: Path) -> None:
    run = RunDir(tmp_path, "live")
    inner = Heard()
    events = LivePage(inner, PageWriter(run.path, {"easy_1": INSTRUCTION}))
    job = Job("easy_1", 1, "oracle")
    events.started(job)
    events.step(job, Step(0, "true", "", 0, 0.01, time.time()))
    index = (run.path / PAGE).read_text()
    assert "running · step 0" in index and "in progress" in index
    assert 'href="./report.md"' not in index  # linked once the run's end writes it
    episode = record("easy_1", "oracle", 1.0)
    run.write_episode(
        episode, [Step(0, "true", "", 0, 0.01, time.time())]
    )  # the journal line first, as Bench does
    events.finished(episode, False)
    index = (run.path / PAGE).read_text()
    assert "running" not in row_of(index, "results", "easy_1") and 'class="pass"' in index
    assert INSTRUCTION in (run.path / "easy_1-s1-oracle" / PAGE).read_text()
    assert inner.heard == ["started easy_1-s1-oracle", "finished easy_1-s1-oracle"]
    assert events.writer.error is None


def test_a_page_that_cannot_be_written_never_stops_the_run(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    run = RunDir(tmp_path, "live")
    events = LivePage(Events(), PageWriter(run.path))

    def broken(page: object) -> str:
        raise ValueError("a bug in the view")

    monkeypatch.setattr("fixos.views.html.live.render_run", broken)
    events.started(Job("easy_1", 1, "oracle"))  # no raise into the bench's worker
    assert events.writer.error == "ValueError: a bug in the view"


# -- the commands ------------------------------------------------------------


def console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out


def test_fixos_view_writes_the_pages_and_says_where(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    con, out = console()
    assert main(["view", RUN_ID, "--results", str(tmp_path)], console=con) == 0
    assert out.getvalue().strip() == f"run page: {run.path / PAGE}"
    assert (run.path / "easy_1-s1-oracle" / PAGE).is_file()
    # the catalogue's words for easy_1
    assert "Customers" in (run.path / "easy_1-s1-oracle" / PAGE).read_text()
    con, out = console()
    assert main(["view", "no-such-run", "--results", str(tmp_path)], console=con) == 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fixos_view_serve_serves_the_run_on_localhost(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "fixos.cli", "view", str(run.path), "--serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.strip() == f"serving run {RUN_ID} at http://127.0.0.1:{port}/ (Ctrl-C stops)"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
            assert f"FixOS run {RUN_ID}" in answer.read().decode()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/easy_1-s1-oracle/", timeout=10) as answer:
            assert "Episode easy_1-s1-oracle" in answer.read().decode()
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0


def test_fixos_compare_prints_the_table_and_writes_the_page(tmp_path: Path) -> None:
    first, second = RunDir(tmp_path, "a"), RunDir(tmp_path, "b")
    first.write_episode(record("easy_1", "baseline", 1.0), [])
    second.write_episode(record("easy_1", "baseline", 0.5), [])
    con, out = console()
    target = tmp_path / "out" / "compare.html"
    assert main(["compare", "a", "b", "--html", str(target), "--results", str(tmp_path)], console=con) == 0
    assert "worse" in out.getvalue() and f"comparison page: {target}" in out.getvalue()
    assert 'class="worse"' in target.read_text()
