"""``fixos view`` and ``compare``, and the run page every run command keeps current
(``fixos.views.html``): written as episodes start and end, and once more at the end."""

from __future__ import annotations

import argparse
import functools
import http.server
from collections.abc import Iterable
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from ..bench.local import Events
from ..core.errors import FixOSError
from ..records.rundir import RunDir
from ..scenarios.catalog import load_catalog
from ..scenarios.schema import Scenario
from ..views.html import PAGE, LivePage, PageWriter, compare_runs, render_compare
from ..views.terminal import comparison_table


def instructions(catalog: dict[str, Scenario], ids: Iterable[str]) -> dict[str, str]:
    """scenario id -> its instruction, for the ids the catalogue still knows."""
    found = {}
    for sid in dict.fromkeys(ids):
        try:
            found[sid] = catalog[sid].instruction
        except (KeyError, FixOSError):  # a scenario since removed, or a generated id gone stale
            continue
    return found


def live_page(inner: Events, run: RunDir, catalog: dict[str, Scenario], ids: Iterable[str]) -> LivePage:
    """``inner`` (the terminal's view) with the run's page kept current beside it."""
    return LivePage(inner, PageWriter(run.path, instructions(catalog, ids)))


def finish_page(events: Events, console: Console) -> Path | None:
    """The run's page once more, as finished (the report's plot is there by now); its path,
    or None and one line saying why when it could not be written (the run itself stands)."""
    if not isinstance(events, LivePage):
        return None
    writer = events.writer
    writer.write_quietly()
    if writer.error is not None:
        console.print(f"run page not written: {escape(writer.error)}", highlight=False)
        return None
    return writer.index


def run_directory(results: Path, run: str) -> Path:
    """A run given by its id under ``results``, or by its directory's path."""
    for candidate in (Path(run), results / run):
        if any((candidate / name).is_file() for name in ("episodes.jsonl", "plan.json", PAGE)):
            return candidate
    raise FixOSError(f"no run {run!r}: neither a run directory nor a run id under {results}/")


def cmd_view(args: argparse.Namespace, console: Console) -> int:
    directory = run_directory(args.results, args.run)
    records = RunDir(directory.parent, directory.name).records()
    writer = PageWriter(
        directory, instructions(load_catalog(args.scenario_dir), (r.scenario for r in records))
    )
    index = writer.write(episodes="all")  # written anew: the run may predate the page, or this FixOS
    if not args.serve:
        console.print(f"run page: {index}", highlight=False)
        return 0
    handler = functools.partial(_QuietHandler, directory=str(directory))
    with http.server.ThreadingHTTPServer(("127.0.0.1", args.port), handler) as server:
        console.print(
            f"serving run {directory.name} at http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)",
            highlight=False,
        )
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            console.print("stopped serving", highlight=False)
    return 0


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the run directory; no line per request (the terminal shows the URL only)."""

    def log_message(self, format: str, *args: object) -> None:
        return


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    first, second = (run_directory(args.results, run) for run in (args.a, args.b))
    comparison = compare_runs(
        first.name,
        RunDir(first.parent, first.name).records(),
        second.name,
        RunDir(second.parent, second.name).records(),
    )
    console.print(comparison_table(comparison))
    if args.html is not None:
        args.html.parent.mkdir(parents=True, exist_ok=True)
        args.html.write_text(render_compare(comparison), encoding="utf-8")
        console.print(f"comparison page: {args.html}", highlight=False)
    return 0
