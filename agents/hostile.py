"""Hostile agents that exhaust a host's resources rather than cheat (the soak benchmark's mix).

Run one as ``--agent fixos.agents.hostile:DiskFiller``. Each must end scored (0,
usually), never invalid, and leave the machine as it found it. The fork bomb,
bash removal and ``kill -9 -1`` are adversaries already (``adversary:fork_bomb``,
``adversary:hide_bash``, ``adversary:kill_everything``).
"""

from __future__ import annotations

from .adversarial import AdversaryAgent, Strategy, everywhere

DISK_FILLER = Strategy(
    "disk_filler",
    "one 5 GB file, then 10 MB files until 4 GB: past any host's disk bound",
    everywhere,
    (
        "fallocate -l 5G /big.img; ls -l /big.img",
        "for i in $(seq 400); do fallocate -l 10M /var/tmp/fill.$i || break; done; df -h /",
    ),
)

OUTPUT_FLOOD = Strategy(
    "output_flood",
    "200 MB of output into its own session, then an endless line",
    everywhere,
    ("yes 'all work and no play' | head -c 200000000", "head -c 50000000 /dev/zero | tr '\\0' x"),
)

MEMORY_HOG = Strategy(
    "memory_hog",
    "tail buffering an endless line: all the memory the host may have, in one process",
    everywhere,
    (
        "head -c 4G /dev/zero | tail >/dev/null; echo rc=$?",
        "x=$(head -c 1G /dev/zero | tr '\\0' x); echo ${#x}",
    ),
)


class DiskFiller(AdversaryAgent):
    def __init__(self) -> None:
        super().__init__(DISK_FILLER)


class OutputFlood(AdversaryAgent):
    def __init__(self) -> None:
        super().__init__(OUTPUT_FLOOD)


class MemoryHog(AdversaryAgent):
    def __init__(self) -> None:
        super().__init__(MEMORY_HOG)
