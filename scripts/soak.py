"""Soak benchmark (`make soak`): hostile and oracle episodes for a while, then what they left.

Runs rounds of `fixos bench -j JOBS` until the time is up; each round mixes the
hostile agents (fork bomb, disk filler, output flood, kill -9 -1, bash removed,
memory hog) with oracle episodes. Reports: episodes scored and invalid (target
0), leftovers of its runs in the engine (target 0), the machine's free disk and
memory before and after, the engine's error lines meanwhile, and the oracle
episodes' rewards (all 1.0). Exit 1 when a target is missed. A script, not a test.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HOSTILE = [
    "adversary:fork_bomb",
    "fixos.agents.hostile:DiskFiller",
    "fixos.agents.hostile:OutputFlood",
    "adversary:kill_everything",
    "adversary:hide_bash",
    "fixos.agents.hostile:MemoryHog",
]
SCENARIOS = ["easy_1", "easy_2", "easy_3"]
ENGINE_LOG = Path("/var/log/fixos-dockerd.log")
"""where scripts/ensure-engine's dockerd writes (the engine's errors are counted there)."""


def free_disk() -> int:
    path = "/var/lib/docker" if os.path.isdir("/var/lib/docker") else "/"
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


def free_memory() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def engine_log_size() -> int:
    return ENGINE_LOG.stat().st_size if ENGINE_LOG.exists() else 0


def engine_errors(since: int) -> list[str]:
    if not ENGINE_LOG.exists():
        return []
    with ENGINE_LOG.open("rb") as log:
        log.seek(since)
        lines = log.read().decode(errors="replace").splitlines()
    return [line for line in lines if "level=error" in line or "level=fatal" in line]


def error_kinds(lines: list[str]) -> Counter[str]:
    """Error lines by message, ids and numbers blanked (the log is the whole engine's:
    other users' runs write there too)."""
    kinds: Counter[str] = Counter()
    for line in lines:
        fields = dict(re.findall(r'(msg|error)="((?:[^"\\]|\\.)*)"', line))
        message = ": ".join(v for v in (fields.get("msg"), fields.get("error")) if v) or line
        kinds[re.sub(r"[0-9a-f]{12,}|\d+", "N", message)[:140]] += 1
    return kinds


def leftovers(run_ids: list[str]) -> list[str]:
    """Containers, networks and volumes any of our runs left in the engine."""
    found: list[str] = []
    for run_id in run_ids:
        label = f"label=fixos.run={run_id}"
        for kind in (["ps", "-a"], ["network", "ls"], ["volume", "ls"]):
            out = subprocess.run(
                ["docker", *kind, "-q", "--filter", label], capture_output=True, text=True, check=False
            ).stdout
            found += [f"{kind[0]} {name}" for name in out.split()]
    return found


def gb(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("-j", "--jobs", type=int, default=4)
    parser.add_argument("--fixos", default=str(Path(sys.executable).with_name("fixos")))
    args = parser.parse_args()

    results = Path(tempfile.mkdtemp(prefix="fixos-soak-"))
    disk0, memory0, log0 = free_disk(), free_memory(), engine_log_size()
    started = time.monotonic()
    deadline = started + args.minutes * 60
    # Each round: JOBS hostile agents and one oracle on one scenario, so oracle
    # episodes run between (and beside) the hostile ones.
    hostile = itertools.cycle(HOSTILE)
    scenarios = itertools.cycle(SCENARIOS)
    rounds = 0
    while time.monotonic() < deadline:
        agents = [next(hostile) for _ in range(args.jobs - 1)] + ["oracle"]
        command = [args.fixos, "bench", "--scenarios", next(scenarios), "-j", str(args.jobs)]
        command += [a for agent in agents for a in ("--agent", agent)] + ["--results", str(results)]
        rounds += 1
        print(f"[soak] round {rounds} at {time.monotonic() - started:.0f}s: {' '.join(agents)}", flush=True)
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    elapsed = time.monotonic() - started
    time.sleep(5)  # the engine's own removals settle

    records = [
        json.loads(line)
        for path in sorted(results.glob("*/episodes.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    run_ids = sorted({p.name for p in results.iterdir() if p.is_dir()})
    scored = [r for r in records if r["status"] == "scored"]
    invalid = [r for r in records if r["status"] != "scored"]
    oracle = [r["reward"] for r in records if r["agent"] == "oracle"]
    left = leftovers(run_ids)
    errors = engine_errors(log0)
    disk1, memory1 = free_disk(), free_memory()

    print(f"\nFixOS soak: {elapsed / 60:.1f} min, -j {args.jobs}, {rounds} rounds, results {results}")
    print(f"episodes scored    {len(scored)}")
    print(f"episodes invalid   {len(invalid)}   (target 0)")
    for r in invalid:
        print(f"  {r['episode_id']} ({r['agent']}): {str(r.get('failure'))[:200]}")
    by_agent: dict[str, list[float]] = {}
    for r in scored:
        by_agent.setdefault(r["agent"], []).append(r["reward"])
    for agent, rewards in sorted(by_agent.items()):
        print(f"  {agent:36} {len(rewards):3} scored, mean reward {sum(rewards) / len(rewards):.2f}")
    print(f"leftovers          {len(left)}   (target 0) {' '.join(left[:10])}")
    print(f"free disk          {gb(disk0)} -> {gb(disk1)} ({(disk1 - disk0) / 2**20:+.0f} MiB)")
    print(f"free memory        {gb(memory0)} -> {gb(memory1)} ({(memory1 - memory0) / 2**20:+.0f} MiB)")
    print(f"engine errors      {len(errors)} lines in {ENGINE_LOG} (all its users', this run's time)")
    for kind, count in error_kinds(errors).most_common(8):
        print(f"  {count:5} x {kind}")
    print(f"oracle rewards     {oracle}   (target all 1.0)")
    ok = not invalid and not left and oracle and all(r == 1.0 for r in oracle)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
