"""The shared /proc readers: the CPU sample's parser on tricky text, and the sample on a live host."""

from __future__ import annotations

import pytest

from fixos.shells.probes import CpuRow, parse_cpu_sample, sample_cpu


def test_a_name_may_hold_spaces_and_parentheses():
    text = "12 my batch job 97\n13 (sd-pam) 4\n14 a) (b 55\n15  lead 3\n16 trail  8\n17  1\n"
    assert parse_cpu_sample(text) == [
        CpuRow(12, "my batch job", 97),
        CpuRow(13, "(sd-pam)", 4),
        CpuRow(14, "a) (b", 55),
        CpuRow(15, " lead", 3),
        CpuRow(16, "trail ", 8),
        CpuRow(17, "", 1),
    ]


def test_a_line_without_both_numbers_is_skipped():
    text = "\nmktemp: failed\n12 job\n12 job 9x\nx12 job 9\n21 nginx 100\n"
    assert parse_cpu_sample(text) == [CpuRow(21, "nginx", 100)]
    assert parse_cpu_sample("") == []


@pytest.mark.live
def test_cpu_sample_finds_the_loops_and_leaves_itself_out(live_host):
    shell = live_host.shell()
    try:
        me = int(shell.run("echo $$").output.strip())
        # A process may name itself anything: spaces and a parenthesis too.
        shell.run(
            "printf '#!/bin/sh\\nwhile :; do :; done\\n' > '/tmp/my job (2)'; chmod +x '/tmp/my job (2)'"
        )
        named = int(shell.run("'/tmp/my job (2)' & echo $!").output.strip())
        loop = int(shell.run("sh -c 'while :; do :; done' & echo $!").output.strip())
        # 300 sleepers make the sampler's own pass over /proc long enough to show.
        shell.run("for i in $(seq 300); do sleep 1000 & done; sleep 0.2")
        # A busy loop wants a whole core; the sample's two readings of /proc are a few
        # milliseconds apart per process, so it reads a little above 100 now and then (107 on
        # a quiet CI rehearsal), and below 85 when the machine's other work shares the two
        # cores (59 in one). What matters is far from the 30% line either way.
        for _ in range(3):
            rows = {row.pid: row for row in sample_cpu(shell)}
            assert me not in rows, f"the sampling shell counted itself: {rows[me]}"
            assert loop in rows and 50 <= rows[loop].percent <= 115, rows
            assert rows[named].comm == "my job (2)" and 50 <= rows[named].percent <= 115, rows
    finally:
        shell.run("pkill -x sleep; pkill -f 'while :; do :; done'; pkill -f '/tmp/my job'")
        shell.close()
