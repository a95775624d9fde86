"""``fixos validate``: prove scenarios sound (oracle 1.0, nop 0.0, partial in between)."""

from __future__ import annotations

import argparse
import time

from rich.console import Console
from rich.markup import escape

from fixos.adversaries import outcome, validate_adversaries
from fixos.bench import default_parallelism
from fixos.cli.common import engine, images
from fixos.episodes import new_run_id
from fixos.scenarios.catalog import load_catalog, select
from fixos.stack.leftovers import remove_labelled
from fixos.stack.pool import HostPool
from fixos.validate import Validation, agents_for, meets, validate
from fixos.view import validation_table


def cmd_validate(args: argparse.Namespace, console: Console) -> int:
    scenarios = select(load_catalog(args.scenario_dir), args.scenarios)
    per_seed = sum(len(agents_for(s)) for s in scenarios)
    seeds = args.seeds.within(per_seed, args.max_episodes)
    client = engine(console)
    tags = images(client, scenarios, console)
    run_id = new_run_id()
    started = time.monotonic()
    rows: list[Validation] = []
    planned = [s.hosts for s in scenarios for _ in seeds for _ in agents_for(s)]
    # One warm spare: the next episode's host boots while this one runs.
    pool = HostPool(client, tags, run_id=run_id, size=1, planned=planned)
    try:
        for scenario in scenarios:
            for seed in seeds:
                row = validate(scenario, seed, client=client, images=tags, run_id=run_id, pool=pool)
                rows.append(row)
                failed = [f"{a}: {r.error or r.reward}" for a, r in row.records.items() if not meets(a, r)]
                console.print(
                    f"{scenario.id} seed {seed}: "
                    + ("ok" if row.ok else "FAILED " + escape("; ".join(failed))),
                    highlight=False,
                )
        adversaries, held = ([], True)
        if args.adversaries:  # each strategy x scenario it applies to must score <= 0.2
            adversaries, held = validate_adversaries(
                scenarios,
                seeds,
                client=client,
                images=tags,
                run_id=run_id,
                parallel=default_parallelism(),
                on_record=lambda case, r: console.print(f"{case.agent} on {case.scenario}: {outcome(r)}"),
            )
    finally:
        pool.close()
        remove_labelled(client, run_id=run_id)
    console.print(validation_table(rows), *adversaries)
    console.print(f"{len(rows)} scenario x seed validations in {time.monotonic() - started:.1f}s")
    return 0 if all(r.ok for r in rows) and held else 1
