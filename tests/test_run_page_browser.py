"""The run page as a person sees it, in a real browser: Debian's chromium driven by
Playwright for Python (``executable_path``: no browser build of Playwright's own is ever
downloaded). A failed check is visible and red, a long output opens on a click, what the agent
changed on disk opens per host with its diff coloured, typing in the filter hides rows, a click
on a header sorts, a hostile transcript runs nothing.

`make test` installs both first (`make setup-browser`); without them these tests fail,
saying how to install them: a page nobody looked at is not tested by being skipped. Each
test saves a screenshot beside its tmp dir; the docs' pictures (docs/img/) are replaced
when what they show changed."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from run_page_data import HOSTILE, INSTRUCTION, make_run

from fixos.views.html import PAGE, PageWriter, load_run, render_run

ROOT = Path(__file__).resolve().parent.parent
DOCS_IMG = ROOT / "docs" / "img"
SETUP = "run `make setup-browser` (Debian's chromium and Playwright for Python; `make test` runs it first)"
WRITTEN_AT = 1796385600.0
"""a fixed time for the page the docs show, so its picture changes only when the page does."""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless chromium, or the reason there is none (each test then fails saying it)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        yield f"Playwright for Python is not installed in this env: {SETUP}"
        return
    chromium = shutil.which("chromium")
    if chromium is None:
        yield f"Debian's chromium is not installed (no `chromium` on PATH): {SETUP}"
        return
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = make_run(tmp_path_factory.mktemp("runs"))
    PageWriter(run.path, {"easy_1": INSTRUCTION}).write(episodes="all")
    page, _ = load_run(run.path)
    page.written_at = WRITTEN_AT
    (run.path / PAGE).write_text(render_run(page), encoding="utf-8")
    return run.path


def open_page(browser: Any, path: Path) -> Any:
    if isinstance(browser, str):
        pytest.fail(browser, pytrace=False)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(path.as_uri())
    page.errors = errors  # the page's own script must run without an error (or a CSP refusal)
    return page


def rgb(colour: str) -> tuple[int, ...]:
    found = re.match(r"rgba?\((\d+), (\d+), (\d+)", colour)
    assert found, colour
    return tuple(int(x) for x in found.groups())


def keep_picture(page: Any, tmp_path: Path, name: str) -> None:
    """A full-page screenshot in the test's tmp dir, copied to docs/img/ when it differs."""
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    target = DOCS_IMG / name
    if not target.exists() or target.read_bytes() != shot.read_bytes():
        DOCS_IMG.mkdir(exist_ok=True)
        shutil.copyfile(shot, target)


def test_a_failed_check_is_visible_and_red(browser: Any, run_dir: Path, tmp_path: Path) -> None:
    page = open_page(browser, run_dir / "easy_1-s1-baseline" / PAGE)
    row = page.locator("#scored-checks tbody tr", has_text="site_up")
    result = row.locator("td").nth(5)
    assert result.is_visible() and result.inner_text() == "FAIL"
    red, green, blue = rgb(result.evaluate("e => getComputedStyle(e).color"))
    assert red > 150 and green < 80 and blue < 80, (red, green, blue)
    background = rgb(row.evaluate("e => getComputedStyle(e).backgroundColor"))
    assert background[0] > background[2], background  # the whole row tinted towards red
    passed = page.locator("#scored-checks tbody tr", has_text="db_up").locator("td").nth(5)
    assert rgb(passed.evaluate("e => getComputedStyle(e).color"))[1] > 80  # a passed one is not red
    assert page.errors == []
    keep_picture(page, tmp_path, "episode-page.png")


def test_a_long_output_opens_on_a_click(browser: Any, run_dir: Path) -> None:
    page = open_page(browser, run_dir / "easy_1-s1-oracle" / PAGE)
    folded = page.locator("#step-1 details")
    output = folded.locator("pre")
    assert not output.is_visible()
    folded.locator("summary").click()
    assert output.is_visible() and "line 39: nginx worker process" in output.inner_text()
    assert folded.evaluate("e => e.open") is True


def test_a_hostile_transcript_is_shown_as_text_and_runs_nothing(browser: Any, run_dir: Path) -> None:
    page = open_page(browser, run_dir / "easy_1-s1-oracle" / PAGE)
    assert page.evaluate("() => window.__pwned === undefined")
    assert HOSTILE in page.locator("#step-0 pre").nth(1).inner_text()
    assert page.locator("img").count() == 0
    assert "[password hash redacted]" in page.locator("#step-2").inner_text()
    assert page.errors == []


def test_what_the_agent_changed_on_disk_shows_once_its_host_is_opened(browser: Any, run_dir: Path) -> None:
    page = open_page(browser, run_dir / "easy_1-s1-oracle" / PAGE)
    host = page.locator("details#disk-web")
    added = host.locator("pre.diff .add", has_text="listen 80 default_server").first
    assert host.is_visible() and not added.is_visible()  # folded: one line per host
    host.locator("summary").click()
    assert added.is_visible() and added.inner_text() == "+    listen 80 default_server;"
    assert host.locator("#disk-files-web").get_by_text("/etc/nginx/sites-available/shop").is_visible()
    assert rgb(added.evaluate("e => getComputedStyle(e).backgroundColor"))[1] > 200  # green
    removed = host.locator("pre.diff .del").first
    assert removed.is_visible() and rgb(removed.evaluate("e => getComputedStyle(e).color"))[0] > 150  # red
    assert page.errors == []


def test_typing_in_the_filter_hides_rows(browser: Any, run_dir: Path) -> None:
    page = open_page(browser, run_dir / PAGE)
    rows = page.locator("#results tbody tr")
    assert rows.count() == 4
    page.locator("#filter").fill("medium")
    visible = [rows.nth(i) for i in range(rows.count()) if rows.nth(i).is_visible()]
    assert [r.locator("td").first.inner_text() for r in visible] == ["medium_3"]
    assert page.locator("#shown").inner_text().startswith("2 of ")  # medium_3's results and episodes rows
    page.locator("#filter").fill("")
    assert all(rows.nth(i).is_visible() for i in range(rows.count()))
    assert page.errors == []


def test_a_click_on_a_header_sorts_and_a_second_reverses(browser: Any, run_dir: Path, tmp_path: Path) -> None:
    page = open_page(browser, run_dir / PAGE)
    header = page.locator("#episodes thead th", has_text=re.compile(r"^reward$"))
    column = page.locator("#episodes tbody tr td:nth-child(7)")
    header.click()
    assert column.all_inner_texts() == ["0.00", "0.50", "1.00", "1.00", "-"]  # not scored: last
    assert header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert column.all_inner_texts() == ["1.00", "1.00", "0.50", "0.00", "-"]
    page.reload()  # the order chosen survives the reload of a page that follows a run
    assert page.locator("#episodes tbody tr td:nth-child(7)").all_inner_texts()[0] == "1.00"
    page.evaluate("() => sessionStorage.clear()")
    page.reload()
    keep_picture(page, tmp_path, "run-page.png")


def test_a_reward_leads_to_its_episode(browser: Any, run_dir: Path) -> None:
    page = open_page(browser, run_dir / PAGE)
    page.locator("#results a", has_text="0.50").click()
    page.wait_for_load_state()
    assert page.title() == "FixOS easy_1-s1-baseline"
    page.locator("a", has_text="run 20261204").click()
    page.wait_for_load_state()
    assert page.title().startswith("FixOS run ")
