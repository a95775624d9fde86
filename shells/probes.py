"""Shell snippets that read the host the way `top` would, shared by the verifier and
the baseline agent (both run them through their own sessions)."""

from __future__ import annotations

from typing import NamedTuple

from .base import Shell

# Every process's CPU demand over half a second, one "pid comm percent-of-a-core"
# line each, from two samples of /proc (no top needed, no terminal either).
# Demand is time on a CPU plus time runnable but waiting for one
# (/proc/PID/schedstat): a busy loop shows ~100% even on a machine so loaded that
# it only gets a fraction of a core, where plain CPU time would make it look
# innocent. schedstat covers the main thread only, so the figure is the larger of
# demand and CPU time of all threads (/proc/PID/stat); an old kernel without
# schedstat gets CPU time alone. The shell that samples is left out (its own
# loop is the busiest thing while it reads /proc), and each process's figure is a
# share of the time that really passed between its two readings (/proc/uptime,
# read beside each): on a loaded machine the passes over /proc slow down, and
# the window is more than the half second asked for.
CPU_SAMPLE = r"""
snap() { for d in /proc/[0-9]*; do read -r up _ < /proc/uptime; read -r l < "$d/stat" 2>/dev/null || continue
  s=; read -r s < "$d/schedstat" 2>/dev/null; echo "$up ${s:--} $l"; done; }
a=$(mktemp); b=$(mktemp); snap > "$a"; sleep 0.5; snap > "$b"
awk -v hz="$(getconf CLK_TCK)" -v self="$$" '{ match($0, /\(.*\)/); c = substr($0, RSTART + 1, RLENGTH - 2);
  split(substr($0, RSTART + RLENGTH + 1), f, " "); pid = ($2 == "-") ? $3 : $5
  cpu = (f[12] + f[13]) * 1e9 / hz; dem = ($2 == "-") ? 0 : $2 + $3 }
  pid == self { next }
  FNR == NR { at[pid] = $1; ac[pid] = cpu; ad[pid] = dem; next }
  (pid in ac) { w = $1 - at[pid]; if (w < 0.5) w = 0.5
    p = (cpu - ac[pid]) / (w * 1e7); q = (dem - ad[pid]) / (w * 1e7); if (q > p) p = q
    if (p >= 1) printf "%s %s %d\n", pid, c, p }' "$a" "$b"
rm -f "$a" "$b"
"""


class CpuRow(NamedTuple):
    """One process in a CPU sample: its demand in percent of a core (100 = a whole core)."""

    pid: int
    comm: str
    percent: int


def parse_cpu_sample(output: str) -> list[CpuRow]:
    """The rows of ``CPU_SAMPLE``'s output. ``comm`` may hold spaces and parentheses
    (a process names itself), so the pid is the first word, the percent the last,
    and the name everything between; a line without both numbers is skipped."""
    rows = []
    for line in output.splitlines():
        pid, _, rest = line.partition(" ")
        comm, _, percent = rest.rpartition(" ")
        if pid.isdigit() and percent.isdigit():
            rows.append(CpuRow(int(pid), comm, int(percent)))
    return rows


def sample_cpu(shell: Shell, timeout: float = 15.0) -> list[CpuRow]:
    """Every process that wanted at least 1% of a core over about half a second."""
    return parse_cpu_sample(shell.run(CPU_SAMPLE, timeout=timeout).output)
