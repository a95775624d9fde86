"""Where an oracle episode's CPU goes, by who spent it (a part of `make perf-price`; alone:
`.venv/bin/python scripts/cpu_ledger.py [--episodes 12] [-j 4] [--scenario easy_1]`).

Machine-wide /proc/stat counts everything that runs on the machine; this ledger counts only
what the benchmark's own run made: this process (and its children), the engine's daemons
(dockerd and containerd, with the children they reaped: runc, iptables, docker-proxy), each of
the run's containers by its cgroup (hosts, the judge), and each container's shim. Other work
on the machine does not enter it, except in the engine's daemons (shared by everything).
What it cannot see: runc (reaped by the shims, whose reaped children are also the
containers) and the kernel's own threads; machine-wide /proc/stat, printed beside it,
holds those and everything else that ran."""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perf_harbor import machine_cpu_seconds

from fixos.bench.local import Bench, Plan
from fixos.episodes.episode import new_run_id
from fixos.records.rundir import RunDir
from fixos.scenarios.catalog import load_catalog
from fixos.stack.engine import Engine, connect
from fixos.stack.images import ensure_image

ROOT = Path(__file__).resolve().parent.parent
CGROUP = Path("/sys/fs/cgroup/cpuacct/docker")
TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: str, children: bool) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11 : 15 if children else 13]) / TICK


def daemons_cpu() -> float:
    total = 0.0
    for name in ("dockerd", "containerd"):
        for pid in subprocess.run(["pgrep", "-x", name], capture_output=True, text=True).stdout.split():
            total += _proc_cpu(pid, children=True)
    return total


class Watch(threading.Thread):
    """Polls the containers' cgroups and shims: the last reading of each, kept after it is gone.
    Cheap by design (it runs on the machine it measures): the cgroups' directory each poll,
    the machine's processes only when a container appears whose shim is not yet known, and
    then each known shim's own stat line."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.cgroups: dict[str, float] = {}
        self.shims: dict[str, float] = {}
        self.names: dict[str, str] = {}
        self._shim_pids: dict[str, str] = {}
        self.stop = threading.Event()
        self._client = connect()

    def run(self) -> None:
        while not self.stop.is_set():
            self.poll()
            time.sleep(0.1)

    def poll(self) -> None:
        for entry in CGROUP.iterdir() if CGROUP.is_dir() else []:
            if not entry.is_dir():
                continue
            try:
                self.cgroups[entry.name] = int((entry / "cpuacct.usage").read_text()) / 1e9
            except OSError:
                continue
            if entry.name not in self.names:
                try:
                    c = self._client.api.inspect_container(entry.name)
                    self.names[entry.name] = c["Config"]["Labels"].get("fixos.run", "") + " " + c["Name"]
                except Exception:
                    self.names[entry.name] = "?"
        if any(cid not in self._shim_pids for cid in self.cgroups):
            self._find_shims()
        for cid, pid in self._shim_pids.items():
            try:
                self.shims[cid] = _proc_cpu(pid, children=False)  # its reaped children are the container
            except (OSError, ValueError, IndexError):
                continue  # gone with its container: its last reading stays

    def _find_shims(self) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                if not cmd[0].endswith(b"containerd-shim-runc-v2"):
                    continue
                self._shim_pids.setdefault(cmd[cmd.index(b"-id") + 1].decode(), pid)
            except (OSError, ValueError, IndexError):
                continue


def ledger(client, images, catalog, scenario: str, episodes: int, parallel: int) -> dict[str, float]:
    """Run ``episodes`` oracle episodes of ``scenario`` at ``-j parallel``: CPU-s per episode
    by spender, episodes per minute, hosts booted and episodes not scored 1.0."""
    run_id = "perf-" + new_run_id()
    run = RunDir(ROOT / "results" / "perf-runs", run_id)
    plan = Plan(scenarios=[scenario], seeds=list(range(1, episodes + 1)), agents=["oracle"])
    watch = Watch()
    watch.poll()
    before_cg, before_shims = dict(watch.cgroups), dict(watch.shims)
    watch.start()
    wall, machine, daemons = time.monotonic(), machine_cpu_seconds(), daemons_cpu()
    me = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    Bench(plan, run, catalog, engines=[Engine("local", client, images)], parallel=parallel).execute()
    wall, machine, daemons = time.monotonic() - wall, machine_cpu_seconds() - machine, daemons_cpu() - daemons
    me2 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    watch.stop.set()
    watch.join()
    watch.poll()
    mine = sum(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime for a, b in zip(me, me2, strict=True))
    spent = {
        "FixOS (this process)": mine,
        "engine (dockerd, containerd)": daemons,
        "hosts": 0.0,
        "judge": 0.0,
        "shims": 0.0,
    }
    hosts = 0
    for cid, usage in watch.cgroups.items():
        label = watch.names.get(cid, "?")
        if run_id not in label or "judge" in label:
            continue  # another run's container; the judge is the engine's: counted once, below
        hosts += 1
        spent["hosts"] += usage - before_cg.get(cid, 0.0)
        spent["shims"] += watch.shims.get(cid, 0.0) - before_shims.get(cid, 0.0)
    for cid, usage in watch.cgroups.items():
        if "judge" in watch.names.get(cid, ""):  # the engine's one judge, whichever run started it
            spent["judge"] += usage - before_cg.get(cid, 0.0)
            spent["shims"] += watch.shims.get(cid, 0.0) - before_shims.get(cid, 0.0)
    figures = {f"{name}: CPU-s per episode": value / episodes for name, value in spent.items()}
    figures["counted: CPU-s per episode"] = sum(spent.values()) / episodes
    figures["machine-wide (/proc/stat): CPU-s per episode"] = machine / episodes
    figures["episodes per minute"] = episodes / (wall / 60)
    figures["hosts booted"] = hosts
    figures["not scored 1.0"] = sum(1 for r in run.records() if r.reward != 1.0)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("-j", type=int, default=4)
    parser.add_argument("--scenario", default="easy_1")
    args = parser.parse_args()
    client = connect()
    images = {name: ensure_image(client, name, lambda line: None) for name in ("server", "inspector")}
    load = os.getloadavg()[0]
    figures = ledger(client, images, load_catalog(ROOT / "scenarios"), args.scenario, args.episodes, args.j)
    after = os.getloadavg()[0]
    print(f"{args.episodes} {args.scenario} oracle episodes at -j {args.j}; load {load:.1f} -> {after:.1f}")
    for name, value in figures.items():
        print(f"  {name:48s} {value:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
