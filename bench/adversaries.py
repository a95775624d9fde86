"""The adversary sweep: every cheating strategy against every scenario it applies
to, on real containers, each required to score <= 0.2 and stay scored (never
invalid). `fixos validate --adversaries` and tests/test_adversarial.py run it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import docker
from rich.table import Table

from ..agents.adversarial import PREFIX, STRATEGIES
from ..episodes.episode import run_episode
from ..records.models import EpisodeRecord
from ..scenarios.schema import Scenario
from ..stack.pool import HostPool

MAX_REWARD = 0.2
"""the most an adversary may earn: the share of one lucky check at most, never a repair."""

LEGITIMATE: dict[tuple[str, str], str] = {
    ("restart_loop", "easy_1"): "the fault is a stopped nginx: the loop's first pass is "
    "`service nginx start`, the reference repair; the loop left behind has nothing more to start",
    ("restart_loop", "easy_2"): "the fault is a stopped MariaDB: the loop's first pass is "
    "`service mariadb start`, the reference repair",
    ("private_config", "tls_3"): "the second fault is a stopped MariaDB: the strategy's first line is "
    "`service mariadb start`, the reference repair of that fault, worth its one check of four (0.25)",
}
"""(strategy, scenario) pairs where the strategy happens to be the real repair, and why:
not required to score low (the test does not run them; the table marks them)."""


@dataclass(frozen=True)
class Case:
    strategy: str
    scenario: str

    @property
    def agent(self) -> str:
        return PREFIX + self.strategy


def cases(scenarios: Iterable[Scenario], strategies: Iterable[str] | None = None) -> list[Case]:
    """Each (strategy, scenario) pair where the strategy applies, scenarios outermost. A
    fault-free control has no repair to fake: its adversary is ``meddler``, which its own
    validation runs (``fixos.bench.validate``)."""
    names = list(strategies) if strategies is not None else list(STRATEGIES)
    return [Case(n, s.id) for s in scenarios if s.faults for n in names if STRATEGIES[n].applies(s)]


def holds(record: EpisodeRecord) -> bool:
    """The verifier saw through the adversary: a score, and a low one."""
    return record.scored and record.reward is not None and record.reward <= MAX_REWARD


def outcome(record: EpisodeRecord) -> str:
    """One cell of the table: the reward, or the status when there is none."""
    if not record.scored or record.reward is None:
        return str(record.status)
    return f"{record.reward:.2f}"


def sweep(
    todo: list[Case],
    catalog: dict[str, Scenario],
    seed: int,
    *,
    client: docker.DockerClient,
    images: dict[str, str],
    run_id: str,
    parallel: int,
    on_record: Callable[[Case, EpisodeRecord], None] | None = None,
) -> dict[Case, EpisodeRecord]:
    """Run every case, ``parallel`` at a time, over warm hosts of one pool."""
    planned = [catalog[c.scenario].hosts for c in todo]
    pool = HostPool(client, images, run_id=run_id, size=parallel, planned=planned)
    results: dict[Case, EpisodeRecord] = {}

    def one(case: Case) -> None:
        record, _ = run_episode(
            catalog[case.scenario], seed, case.agent, client=client, images=images, run_id=run_id, pool=pool
        )
        results[case] = record
        if on_record is not None:
            on_record(case, record)

    try:
        with ThreadPoolExecutor(max_workers=parallel) as workers:
            for future in [workers.submit(one, c) for c in todo]:
                future.result()
    finally:
        pool.close()
    return results


def table_rows(results: dict[Case, EpisodeRecord]) -> tuple[list[str], list[list[str]]]:
    """Columns (scenarios) and rows (a strategy, then its cell per scenario; '-' where it does not apply)."""
    scenarios = sorted({c.scenario for c in results}, key=_scenario_order)
    rows = []
    for name in STRATEGIES:
        cells = {c.scenario: outcome(r) for c, r in results.items() if c.strategy == name}
        if cells:
            rows.append([name] + [cells.get(s, "-") for s in scenarios])
    return scenarios, rows


def _scenario_order(sid: str) -> tuple[int, int]:
    level, _, number = sid.rpartition("_")
    return (
        ["easy", "medium", "hard"].index(level) if level in ("easy", "medium", "hard") else 3,
        int(number) if number.isdigit() else 0,
    )


def adversary_table(results: dict[Case, EpisodeRecord], seed: int) -> Table:
    """Strategy x scenario: green when seen through, red when it earned, yellow when unscored."""
    scenarios, rows = table_rows(results)
    table = Table(title=f"fixos validate --adversaries (seed {seed}): each must score <= {MAX_REWARD}")
    for column in ["strategy", *scenarios]:
        table.add_column(column)
    by_cell = {(c.strategy, c.scenario): r for c, r in results.items()}
    for name, *cells in rows:
        shown = []
        for scenario, cell in zip(scenarios, cells, strict=True):
            record = by_cell.get((name, scenario))
            if record is None:
                shown.append("-")
            elif (name, scenario) in LEGITIMATE:
                shown.append(f"[dim]{cell} (repair)[/]")
            else:
                shown.append(
                    f"[{'green' if holds(record) else 'yellow' if not record.scored else 'red'}]{cell}[/]"
                )
        table.add_row(name, *shown)
    return table


def failures(results: dict[Case, EpisodeRecord]) -> list[Case]:
    """Cases the verifier did not see through, leaving out the legitimate repairs."""
    return [c for c, r in results.items() if not holds(r) and (c.strategy, c.scenario) not in LEGITIMATE]


def validate_adversaries(
    scenarios: list[Scenario],
    seeds: list[int],
    *,
    client: docker.DockerClient,
    images: dict[str, str],
    run_id: str,
    parallel: int,
    on_record: Callable[[Case, EpisodeRecord], None] | None = None,
) -> tuple[list[Table], bool]:
    """The full sweep over ``scenarios`` for each seed: one table per seed, and whether all held."""
    catalog = {s.id: s for s in scenarios}
    tables, held = [], True
    for seed in seeds:
        results = sweep(
            cases(scenarios),
            catalog,
            seed,
            client=client,
            images=images,
            run_id=run_id,
            parallel=parallel,
            on_record=on_record,
        )
        tables.append(adversary_table(results, seed))
        held = held and not failures(results)
    return tables, held
