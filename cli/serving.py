"""``fixos export`` and ``serve``: the scenarios handed to another harness (task directories, OpenEnv)."""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.markup import escape

from ..core.errors import FixOSError
from ..episodes.episode import new_run_id
from ..scenarios.catalog import load_catalog, select
from ..stack.leftovers import remove_labelled
from .common import engine, images


def cmd_export(args: argparse.Namespace, console: Console) -> int:
    from ..exporter import export_harbor

    chosen = select(load_catalog(args.scenario_dir, only=args.scenarios), args.scenarios)
    # a control's score rests on the gate `untouched`, which needs the judge outside the host:
    # an exported task's verifier runs inside it, where nop and a meddler would both score 1.0
    scenarios = [s for s in chosen if s.faults]
    skipped = [s.id for s in chosen if not s.faults]
    if skipped:
        console.print(
            f"not exported: {', '.join(skipped)} (fault-free controls need the judge outside the host)",
            highlight=False,
        )
    if not scenarios:
        raise FixOSError("nothing to export: fault-free controls cannot be judged inside an exported task")
    seeds = args.seeds.within(len(scenarios), args.max_episodes, "tasks")
    client = engine(console)
    tags = images(client, scenarios, console)
    run_id = new_run_id()
    started = time.monotonic()
    try:
        tasks = export_harbor(
            scenarios,
            seeds,
            args.out,
            client=client,
            images=tags,
            run_id=run_id,
            say=lambda line: console.print(escape(line), highlight=False),
        )
    finally:
        remove_labelled(client, run_id=run_id)
    console.print(
        f"wrote {len(tasks)} {args.format} task(s) under {args.out}/ in {time.monotonic() - started:.1f}s",
        highlight=False,
    )
    return 0


def cmd_serve(args: argparse.Namespace, console: Console) -> int:
    from ..server.app import serve  # imported here: OpenEnv is heavy, and only this command needs it
    from ..server.environment import ServerContext

    catalog = load_catalog(args.scenario_dir)
    client = engine(console)
    tags = images(client, list(catalog.values()), console)
    context = ServerContext(
        client=client,
        catalog=catalog,
        images=tags,
        warm=max(0, args.warm),
        prepare_ahead=max(0, args.prepare_ahead),
    )
    console.print(
        f"serving FixOS over OpenEnv on http://127.0.0.1:{args.port} (run {context.run_id}, "
        f"at most {args.max_sessions} sessions, idle ones closed after {args.session_timeout:g}s); "
        "Ctrl-C stops it and removes every session's containers",
        highlight=False,
    )
    serve(
        port=args.port,
        max_sessions=args.max_sessions,
        session_timeout=args.session_timeout,
        context=context,
    )
    return 0
