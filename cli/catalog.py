"""``fixos setup``, ``list`` and ``clean``: the images, the scenarios and the leftovers."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape

from ..core.errors import FixOSError
from ..scenarios.catalog import DIFFICULTIES, load_catalog, select
from ..scenarios.describe import describe
from ..scenarios.generator import LEVELS, ids
from ..scenarios.worlds import held_out, split
from ..stack.engine import connect
from ..stack.leftovers import remove_labelled
from ..views.terminal import scenarios_table
from .common import engines, sweep, sweep_if_engine


def cmd_setup(args: argparse.Namespace, console: Console) -> int:
    catalog = load_catalog(args.scenario_dir)
    for engine in engines(args.docker_host, list(catalog.values()), console, prefix="[setup] engine: "):
        for name, tag in engine.images.items():
            console.print(escape(f"[setup] {engine.url}: image {name}: {tag} ready"), highlight=False)
    return 0


def cmd_list(args: argparse.Namespace, console: Console) -> int:
    if getattr(args, "scenario", None):  # `fixos list ID` is `fixos show-scenario ID`
        return cmd_show_scenario(args, console)
    catalog = load_catalog(args.scenario_dir)
    if args.generated is not None:  # pure: no engine asked, nothing swept
        level, count = args.generated, args.count
        if level not in LEVELS or count < 1:
            raise FixOSError(f"--generated takes a level 1-{max(LEVELS)} and --count at least 1")
        chosen = [catalog[i] for i in ids(level, count, args.split, held_out())]
        console.print(scenarios_table(chosen, splits=[split(s.id) for s in chosen]))
        return 0
    sweep_if_engine(console)
    console.print(scenarios_table(list(catalog.values())))
    return 0


def cmd_show_scenario(args: argparse.Namespace, console: Console) -> int:
    """One scenario as its author reads it, with the gates it inherits expanded."""
    catalog = load_catalog(args.scenario_dir)
    (scenario,) = select(catalog, [args.scenario]) if args.scenario not in DIFFICULTIES else [None]
    if scenario is None:
        raise FixOSError(f"show-scenario takes one scenario id, not the difficulty {args.scenario!r}")
    console.print(describe(scenario), markup=False, highlight=False)
    return 0


def cmd_clean(args: argparse.Namespace, console: Console) -> int:
    removed = 0
    for url in args.docker_host or [None]:
        client = connect(url)
        sweep(client, console)
        removed += remove_labelled(client, run_id=args.run)
    console.print(f"removed {removed} container(s) and their networks", highlight=False)
    return 0
