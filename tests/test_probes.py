"""The shared /proc readers, on a live host."""

from __future__ import annotations

import pytest

from fixos.shells.probes import CPU_SAMPLE

pytestmark = pytest.mark.live


def test_cpu_sample_finds_the_loop_and_leaves_itself_out(live_host):
    shell = live_host.shell()
    try:
        me = shell.run("echo $$").output.strip()
        # 300 sleepers make the sampler's own pass over /proc long enough to show.
        loop = shell.run("sh -c 'while :; do :; done' & echo $!").output.strip()
        shell.run("for i in $(seq 300); do sleep 1000 & done; sleep 0.2")
        for _ in range(3):
            sample = shell.run(CPU_SAMPLE, timeout=15).output
            rows = {row.split()[0]: row.split() for row in sample.splitlines()}
            assert me not in rows, f"the sampling shell counted itself: {rows[me]}"
            assert loop in rows and 85 <= int(rows[loop][2]) <= 105, rows
    finally:
        shell.run("pkill -x sleep; pkill -f 'while :; do :; done'")
        shell.close()
