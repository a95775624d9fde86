"""The shaped per-step reward, as the simulated FixOS gave it, from live probes.

A pure function of the command, what the probes saw before and after it, and the
verifier's scored-check progress before and after. Each row of ``TABLE`` is earned at
most once per step; the sum is clamped to [0, 1]. The episode's score is not this:
it is the verifier's reward at the end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .hostview import HostView

TABLE: dict[str, float] = {
    "explore": 0.1,
    "diagnose": 0.2,
    "edit": 0.3,
    "kill_hog": 0.3,
    "free_disk": 0.3,
    "service_up": 0.5,
    "disk_normal": 0.5,
    "solved": 0.5,
}
PROGRESS_WEIGHT = 0.4
"""times the change in the share of scored checks passing (negative when the agent breaks one)."""
DISK_FULL = 95.0
FREED_MB = 1.0

_READERS = {
    "ps", "top", "htop", "pstree", "pgrep", "df", "du", "free", "uptime", "vmstat", "iostat",
    "ss", "netstat", "lsof", "ls", "cat", "less", "more", "head", "tail", "grep", "egrep", "zgrep",
    "find", "stat", "file", "wc", "journalctl", "dmesg", "id", "whoami", "ip", "curl", "wget",
    "mount", "findmnt", "getfacl", "namei", "which", "env", "sysctl", "ulimit", "readlink",
    "awk", "gawk", "mawk", "tac", "nl", "zcat", "zless", "sort", "uniq", "cut", "diff", "strings",
}  # fmt: skip
_IN_PLACE = re.compile(r"\s(-[a-zA-Z]*i\S*|--in-place\S*)")
"""sed edits a file with -i / --in-place; without either it only prints (``sed -n 1,40p f``)."""
_STATUS = re.compile(r"\b(service\s+\S+\s+status|systemctl\s+status|nginx\s+-t|php-fpm\S*\s+-t)\b")
_LOOKS_AT = re.compile(r"(/var/log/|/etc/|\bnginx\s+-t\b|\bjournalctl\b|\bdmesg\b|\bstatus\b)")
_TROUBLE = re.compile(
    r"\b(error|errors|warn|warning|failed|failure|fatal|emerg|crit|denied|refused|"
    r"no space|cannot|can't|unable|invalid|unknown directive|not running|killed)\b",
    re.IGNORECASE,
)
_WRITES = re.compile(
    r"(\b(sed|perl)\b[^|;&]*\s-[\w]*i|\btee\b|\bcp\b|\bmv\b|\bchmod\b|\bchown\b|\bln\b|"
    r"\btruncate\b|\bpatch\b|(?<![0-9&])>{1,2}\s*(?!\s*/dev/null|&)[\w/.~$\"'])"
)

_KILLS = re.compile(r"\b(kill|pkill|killall)\b")
_REMOVES = re.compile(r"\b(rm|truncate|shred|logrotate)\b|-delete\b|(?<![0-9&<])>\s*[\w/.~$\"']")


@dataclass(frozen=True)
class StepReward:
    value: float
    parts: dict[str, float] = field(default_factory=dict)


def _programs(command: str) -> list[tuple[str, str]]:
    """Each simple command's program name, and the rest of its words."""
    words = []
    for piece in re.split(r"[|;&]+|\$\(|`", command):
        tokens = piece.strip().split()
        while tokens and ("=" in tokens[0] or tokens[0] in ("sudo", "env", "nice", "timeout", "-n")):
            tokens = tokens[1:]
        if tokens:
            words.append((tokens[0].rsplit("/", 1)[-1], " " + " ".join(tokens[1:])))
    return words


def _reads(program: str, rest: str) -> bool:
    return program in _READERS or (program == "sed" and not _IN_PLACE.search(rest))


def is_exploration(command: str) -> bool:
    return bool(_STATUS.search(command)) or any(_reads(p, rest) for p, rest in _programs(command))


def is_edit(command: str) -> bool:
    return bool(_WRITES.search(command))


def step_reward(
    command: str,
    output: str,
    before: HostView,
    after: HostView,
    progress_before: float,
    progress_after: float,
    *,
    solved: bool,
    repeated: bool = False,
) -> StepReward:
    """The reward of one step; ``repeated`` (the same command line again) earns no reading credit."""
    parts: dict[str, float] = {}
    if not repeated and is_exploration(command):
        parts["explore"] = TABLE["explore"]
        if _LOOKS_AT.search(command) and _TROUBLE.search(output):
            parts["diagnose"] = TABLE["diagnose"]
    if is_edit(command):
        parts["edit"] = TABLE["edit"]
    if not (before.error or after.error):
        if _KILLS.search(command) and before.hogs - after.pids:
            parts["kill_hog"] = TABLE["kill_hog"]
        freed = sum(b.used_mb - a.used_mb for b in before.disks for a in after.disks if a.mount == b.mount)
        if freed >= FREED_MB and _REMOVES.search(command):
            parts["free_disk"] = TABLE["free_disk"]
        if after.running - before.running:
            parts["service_up"] = TABLE["service_up"]
        if before.disk_percent > DISK_FULL >= after.disk_percent:
            parts["disk_normal"] = TABLE["disk_normal"]
    if solved:
        parts["solved"] = TABLE["solved"]
    delta = round(progress_after - progress_before, 4)
    if delta:
        parts["progress"] = round(PROGRESS_WEIGHT * delta, 4)
    return StepReward(round(min(1.0, max(0.0, sum(parts.values()))), 4), parts)
