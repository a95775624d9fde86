"""Harbor side by side with FixOS on the same task (a part of `make perf`; alone:
`make perf-harbor`): N oracle trials of easy_1 seed 1, C at a time, under Harbor's own
runner (`harbor run`, its local Docker environment, on the task `fixos export` wrote)
and as FixOS episodes (the same scenario, N seeds, -j C), in turn, ROUNDS times, each
runner first in every other round and on a quiet machine (``settle``). FixOS runs twice
a round: as the `fixos bench` command (a process of its own, like `harbor run`: its
start-up, report and run page included) and through the Python API a trainer or a
long-lived service uses (``Bench.execute`` in this process). Each round's figures: wall
seconds and machine-wide CPU-seconds (/proc/stat: FixOS, Harbor, the engine and
everything else on the machine), and the ratios of episodes per minute, FixOS / Harbor.
Also how many cores each kept busy, and the ratio of CPU-seconds per episode: where the
wall ratio falls below it, the difference is idle time at a run's edges, not work.
``--without-hold`` adds a fourth runner, the API with the final verdicts' hold window cut
to 0 s: not a valid score, only what the hold costs a run of this size. Last, one run of
``cpu_ledger`` weighs FixOS's own work (its process, the judge) in an episode, and the CPU
ratio is given again with that work free: how far any speed-up of FixOS itself could take it,
against the hosts' boots and restarts and the engine, which every valid episode pays. That
run's split is printed too: the hosts, the engine, the shims, FixOS's process, the judge, and
the rest (the kernel's own work, anything else on the machine).

    .venv/bin/python scripts/perf_harbor.py [--trials 8] [--concurrent 4] [--rounds 4] [--without-hold]
"""

from __future__ import annotations

import argparse
import functools
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its neighbours, also when loaded by path
from harbor_env import ROOT, ensure_harbor, harbor_env, run_job
from perf_results import write_results

from fixos.bench.local import Bench, Plan
from fixos.episodes import durability
from fixos.episodes import episode as episode_module
from fixos.episodes.durability import HOLD_SECONDS
from fixos.episodes.episode import new_run_id
from fixos.exporter import export_harbor
from fixos.records.rundir import RunDir
from fixos.scenarios.catalog import load_catalog
from fixos.stack.engine import Engine, connect
from fixos.stack.images import ensure_base, ensure_image
from fixos.stack.leftovers import remove_labelled
from fixos.views.console import make_console

SCENARIO = "easy_1"
_TICK = os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """CPU time spent by the whole machine so far (every state but idle, iowait and steal)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    # Steal is the hypervisor's: time this machine's CPUs waited while another guest ran.
    # It is no work of FixOS, Harbor or the engine, and on this VM it swung from 0 to a
    # third of an episode's figure with the neighbours' load: left out.
    user, nice, system, _idle, _iowait, irq, softirq, _steal = fields[:8]
    return (user + nice + system + irq + softirq) / _TICK


def _timed(run) -> tuple[float, float, object]:
    cpu, wall = machine_cpu_seconds(), time.monotonic()
    result = run()
    return time.monotonic() - wall, machine_cpu_seconds() - cpu, result


def settle(limit: float = 30.0, busy: float = 0.15) -> None:
    """Wait until the machine is quiet (less than ``busy`` CPU-s in a second, at most
    ``limit`` s): the engine goes on removing a runner's containers after the runner has
    returned, and the next runner measured must not pay for that."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = machine_cpu_seconds()
        time.sleep(1.0)
        if machine_cpu_seconds() - before < busy:
            return


def measure_side_by_side(
    trials: int, concurrent: int, rounds: int, say=print, without_hold: bool = False
) -> dict[str, float]:
    client = connect()
    catalog = load_catalog()
    images = {name: ensure_image(client, name, lambda line: None) for name in ("server", "inspector")}
    harbor = ensure_harbor(say=say)
    env = harbor_env(ensure_base(client, lambda line: None))
    work = Path(tempfile.mkdtemp(prefix="fixos-perf-harbor-"))
    run_id = f"perf-harbor-{secrets.token_hex(3)}"
    try:
        export_harbor([catalog[SCENARIO]], [1], work / "tasks", client=client, images=images, run_id=run_id)
    finally:
        remove_labelled(client, run_id=run_id)
    engine = Engine("local", client, images)

    def harbor_round(name: str, n: int) -> None:
        got = run_job(
            harbor, work / "tasks", agents=["oracle"], attempts=n, concurrent=concurrent, env=env,
            jobs_dir=work / "jobs", job_name=name, log=work / "harbor.log",
        )  # fmt: skip
        if [t.reward for t in got] != [1.0] * n:
            raise RuntimeError(f"Harbor's oracle trials scored {[t.reward for t in got]}; see {work}")

    def fixos_command(n: int) -> None:
        results = work / "fixos-runs"
        before = set(results.iterdir()) if results.is_dir() else set()
        fixos = Path(sys.executable).with_name("fixos")
        command = [str(fixos), "bench", "--scenarios", SCENARIO, "--seeds", f"1-{n}", "--agent", "oracle"]
        with (work / "fixos.log").open("ab") as out:
            done = subprocess.run(
                [*command, "-j", str(concurrent), "--results", str(results)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        made = sorted(set(results.iterdir()) - before)
        rewards = [r.reward for r in RunDir(results, made[-1].name).records()] if made else []
        if done.returncode != 0 or rewards != [1.0] * n:
            raise RuntimeError(
                f"fixos bench exited {done.returncode}, its episodes scored {rewards}; see {work}"
            )

    def fixos_round(n: int) -> None:
        run = RunDir(ROOT / "results" / "perf-runs", "perf-" + new_run_id())
        plan = Plan(scenarios=[SCENARIO], seeds=list(range(1, n + 1)), agents=["oracle"])
        Bench(plan, run, catalog, engines=[engine], parallel=concurrent).execute()
        rewards = [r.reward for r in run.records()]
        if rewards != [1.0] * n:
            raise RuntimeError(f"FixOS's oracle episodes scored {rewards}")

    def unheld_round(n: int) -> None:
        # A measurement only, never a score: the final verdicts' hold window cut to 0 s,
        # to show what the hold costs a run of this size (at its end nothing overlaps it).
        unheld = functools.partial(durability.durable_verdict, hold=0.0)
        with mock.patch.object(episode_module, "durable_verdict", unheld):
            fixos_round(n)

    say(f"[perf-harbor] warm-up: 1 Harbor trial (builds the task's image once), {concurrent} FixOS episodes")
    harbor_round("warmup", 1)
    fixos_round(concurrent)
    keys = ("harbor", "command", "fixos", *(("unheld",) if without_hold else ()))
    rows: dict[str, list[float]] = {f"{k}_{m}": [] for k in keys for m in ("s", "cpu")}
    for i in range(rounds):
        # each runner starts on a quiet machine, and first in every other round
        runners = [
            ("harbor", lambda i=i: harbor_round(f"round{i}", trials)),
            ("command", lambda: fixos_command(trials)),
            ("fixos", lambda: fixos_round(trials)),
            *((("unheld", lambda: unheld_round(trials)),) if without_hold else ()),
        ]
        for name, runner in runners if i % 2 == 0 else runners[::-1]:
            settle()
            wall, cpu, _ = _timed(runner)
            rows[f"{name}_s"].append(wall)
            rows[f"{name}_cpu"].append(cpu)
        harbor_s, command_s, fixos_s = (rows[f"{k}_s"][-1] for k in ("harbor", "command", "fixos"))
        unheld = f", the API without the hold {rows['unheld_s'][-1]:.1f} s" if without_hold else ""
        say(
            f"[perf-harbor] round {i + 1}: Harbor {harbor_s:.1f} s, `fixos bench` {command_s:.1f} s,"
            f" FixOS's API {fixos_s:.1f} s{unheld}"
        )
    label = f"{trials} {SCENARIO} oracle trials, {concurrent} at a time"
    figures = {
        f"Harbor {label}: median wall s": statistics.median(rows["harbor_s"]),
        f"Harbor {label}: median machine CPU-s per trial": statistics.median(rows["harbor_cpu"]) / trials,
        f"Harbor {label}: median cores busy": _busy(rows, "harbor"),
    }
    for key, name in (("command", "`fixos bench`"), ("fixos", "FixOS's API")):
        ratios = [h / f for h, f in zip(rows["harbor_s"], rows[f"{key}_s"], strict=True)]
        figures[f"{name} {label}: median wall s"] = statistics.median(rows[f"{key}_s"])
        figures[f"{name} {label}: median machine CPU-s per episode"] = (
            statistics.median(rows[f"{key}_cpu"]) / trials
        )
        figures[f"{name} {label}: median cores busy"] = _busy(rows, key)
        figures[f"{name} / Harbor episodes per minute ({label}): median ratio"] = statistics.median(ratios)
        # What the wall ratio would be if both kept the machine equally busy: the part of
        # the gap that is each run's idle edges (start-up, the last episodes' hold, removals).
        cpu_ratios = [h / f for h, f in zip(rows["harbor_cpu"], rows[f"{key}_cpu"], strict=True)]
        figures[f"{name} / Harbor CPU-s per episode ({label}): median ratio"] = statistics.median(cpu_ratios)
    if without_hold:
        name = f"FixOS's API, the hold cut to 0 s (not a valid score), {label}"
        figures[f"{name}: median wall s"] = statistics.median(rows["unheld_s"])
        figures[f"{name}: median ratio to Harbor"] = statistics.median(
            h / f for h, f in zip(rows["harbor_s"], rows["unheld_s"], strict=True)
        )
        costs = [f - u for f, u in zip(rows["fixos_s"], rows["unheld_s"], strict=True)]
        figures[f"the {HOLD_SECONDS:g} s hold, {label}: median wall s it adds to the API's run"] = (
            statistics.median(costs)
        )
    figures.update(
        ceiling(rows, trials, label, ledger_of=lambda: spenders(client, images, catalog, trials, concurrent))
    )
    return figures


SPENDERS = {
    "hosts": "the hosts (their boots, faults, repairs, and a second start of every service)",
    "engine (dockerd, containerd)": "the engine (dockerd, containerd and what they run: runc, iptables)",
    "shims": "the containers' shims",
    "FixOS (this process)": "FixOS's process",
    "judge": "the judge",
}
"""each ``cpu_ledger`` spender, and what it stands for in the split printed beside the ceiling."""
OWN = ("FixOS (this process)", "judge")
"""the spenders that are FixOS's own work: what a faster FixOS could still take off."""


def spenders(client, images, catalog, trials: int, concurrent: int) -> dict[str, float]:
    """CPU-s per episode of each spender in a run like the API's, by ``cpu_ledger`` (a run of
    its own: the ledger's watch would weigh on the rounds)."""
    from cpu_ledger import ledger  # it imports this module

    return ledger(client, images, catalog, SCENARIO, trials, concurrent)


def ceiling(rows: dict[str, list[float]], trials: int, label: str, ledger_of) -> dict[str, float]:
    """How far the CPU ratio could go: Harbor's CPU-s per trial over what FixOS's episode costs
    without FixOS's own work (the hosts' boots and restarts, the engine, the kernel: what the
    episode's world and its validity phases cost whoever drives them). ``ledger_of()``: the
    ledger's figures; its split by spender is given too, with what no spender was charged
    (the kernel's own work, anything else on the machine) as the rest."""
    harbor = statistics.median(rows["harbor_cpu"]) / trials
    api = statistics.median(rows["fixos_cpu"]) / trials
    spent = ledger_of()
    own = sum(spent[f"{name}: CPU-s per episode"] for name in OWN)
    if not 0 <= own < api:
        raise RuntimeError(f"FixOS's own work measured {own:.3f} CPU-s of an episode of {api:.3f}")
    whole = spent["machine-wide (/proc/stat): CPU-s per episode"]
    split = {
        f"the ledger's run ({label}), {what}: CPU-s per episode": spent[f"{name}: CPU-s per episode"]
        for name, what in SPENDERS.items()
    }
    split[f"the ledger's run ({label}), the rest (the kernel, anything else): CPU-s per episode"] = (
        whole - spent["counted: CPU-s per episode"]
    )
    split[f"the ledger's run ({label}), machine-wide: CPU-s per episode"] = whole
    return {
        **split,
        f"FixOS's own work (its process, the judge), {label}: CPU-s per episode": own,
        f"FixOS's API without its own work, {label}: CPU-s per episode": api - own,
        f"Harbor / that ({label}): the CPU ratio with FixOS's own work free": harbor / (api - own),
    }


def _busy(rows: dict[str, list[float]], key: str) -> float:
    """Median over rounds of machine CPU-seconds per wall second: how many cores a run kept busy."""
    return statistics.median(c / s for c, s in zip(rows[f"{key}_cpu"], rows[f"{key}_s"], strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--concurrent", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4, help="each runner goes first in half of them")
    parser.add_argument(
        "--without-hold",
        action="store_true",
        help="also run the API with the hold window cut to 0 s (no valid score): what the hold costs",
    )
    args = parser.parse_args()
    console = make_console()
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode != 0:
        console.print("perf-harbor: 'docker compose' does not answer: scripts/ensure-compose installs it")
        return 2
    figures = measure_side_by_side(
        args.trials, args.concurrent, args.rounds, say=console.print, without_hold=args.without_hold
    )
    figures["load average (1 min) at the end"] = os.getloadavg()[0]
    for name, value in figures.items():
        console.print(f"{name}: {value:.2f}", markup=False, highlight=False)
    write_results("perf-harbor", {"figures": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
