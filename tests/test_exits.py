"""The final verdict waits for killed processes to finish exiting, and only for them."""

from __future__ import annotations

import functools
import time

import pytest
from helpers import labelled

from fixos.episodes.episode import Episode
from fixos.scenarios.catalog import load_catalog
from fixos.verifier.base import Probe
from fixos.verifier.exits import dying, dying_of, dying_on, wait_for_exits

# Three busy loops on CPU 0 leave a SCHED_IDLE process pinned there almost no CPU.
STARVE_CPU0 = "for i in 1 2 3; do taskset -c 0 sh -c 'while :; do :; done' & done; sleep 0.3"
# The same for a few seconds only: long enough to starve a victim killed meanwhile, short
# enough that a verdict's restarts and pages after it run on a machine as busy as it is.
STARVE_CPU0_BRIEFLY = STARVE_CPU0.replace("taskset", "timeout 4 taskset")
IDLE_ON_CPU0 = "taskset -c 0 chrt -i 0"
CATCHES_TERM = "'$SIG{TERM} = sub {}; sleep 1000 while 1'"
STAT_TAIL = "0 -1 {flags} 301 0 2 0 1 0 0 0 20 0 1 0 2711608 7507968 637"


def stat(pid: int, comm: str, state: str, flags: int) -> str:
    return f"/proc/{pid}/stat:{pid} ({comm}) {state} 8 8 8 " + STAT_TAIL.format(flags=flags)


def test_dying_reads_pending_sigkill_and_exiting_flag():
    text = "\n".join(
        [
            "/proc/16/status:SigPnd:\t0000000000000100",  # kill sent, not run yet
            "/proc/16/status:ShdPnd:\t0000000000004000",
            "/proc/17/status:SigPnd:\t0000000000000000",
            "/proc/17/status:ShdPnd:\t0000000000004000",  # SIGTERM it catches: its own business
            stat(16, "perl", "R", 4194560),
            stat(17, "perl", "S", 4194560),
            stat(18, "odd ) name (x", "D", 4194564),  # exiting, a name that fools naive parsing
            stat(19, "reaped-later", "Z", 4194308),  # a zombie has let go of everything
            "/proc/20/stat:garbage",
            "grep: /proc/21/status: No such file or directory",
        ]
    )
    assert dying(text) == [16, 18]
    assert dying("") == []


def test_a_caught_signal_not_yet_acted_on_is_waited_for():
    """nginx's master with the SIGHUP of a reload pending: its old workers still serve the
    old configuration until it runs; the same signal blocked, or not caught, is not waited for."""
    hup = "0000000000000001"
    text = "\n".join(
        [
            f"/proc/30/status:ShdPnd:\t{hup}",  # reload sent, master not run yet
            f"/proc/30/status:SigCgt:\t{hup}",
            "/proc/30/status:SigBlk:\t0000000000000000",
            f"/proc/31/status:ShdPnd:\t{hup}",  # caught but blocked: it chose to wait
            f"/proc/31/status:SigCgt:\t{hup}",
            f"/proc/31/status:SigBlk:\t{hup}",
            f"/proc/32/status:SigPnd:\t{hup}",  # not caught (ignored): nothing will happen
            "/proc/32/status:SigCgt:\t0000000000000000",
            stat(30, "nginx", "S", 4194560),
            stat(31, "nginx", "S", 4194560),
            stat(32, "sleep", "S", 4194560),
        ]
    )
    assert dying(text) == [30]


@pytest.mark.live
def test_a_starved_process_is_dying_until_it_has_exited(live_host):
    shell = live_host.shell()
    here = Probe(None, shell, live_host)  # type: ignore[arg-type]  # read from this machine
    try:
        assert dying_on(shell) == [] and dying_of(here) == [], "a quiet host has nothing dying"
        # A starved SCHED_IDLE victim lingers after `kill` (often for a second), as a
        # killed process does on a busy machine. How long is up to the scheduler,
        # hence a few tries to see it dying once.
        shell.run(STARVE_CPU0)
        seen, seen_here = [], []
        for _ in range(5):
            victim = shell.run(f"{IDLE_ON_CPU0} perl -e '1 while 1' >/dev/null & echo $!").output.strip()
            time.sleep(0.3)
            shell.run(f"kill {victim}")
            seen_here.append(bool(dying_of(here)))
            seen.append(int(victim) in dying_on(shell))
            assert wait_for_exits({"web": shell}) < 10
            assert dying_on(shell) == [] and dying_of(here) == []
            state = shell.run(f"cut -d' ' -f3 /proc/{victim}/stat 2>/dev/null || echo gone").output.strip()
            assert state in ("Z", "gone"), "waited until the victim had let go of everything"
            if any(seen) and any(seen_here):
                break
        assert any(seen), f"never saw a starved victim dying after kill: {seen}"
        assert any(seen_here), f"this machine never saw a starved victim dying after kill: {seen_here}"

        catcher = shell.run(f"perl -e {CATCHES_TERM} >/dev/null & echo $!").output.strip()
        time.sleep(0.3)
        shell.run(f"kill {catcher}")
        assert wait_for_exits({"web": shell}) < 1, "a process that catches the signal is not waited for"
        assert wait_for_exits({"web": functools.partial(dying_of, here)}) < 1
        assert shell.run(f"kill -0 {catcher}").ok
    finally:
        shell.run("pkill -f 'while :; do :; done'; pkill perl")
        shell.close()


@pytest.mark.live
def test_a_kill_as_the_last_command_is_scored_after_the_exit(client, images, test_run_id):
    """easy_4's hog, killed in the agent's last command while busy loops starve it,
    still scores 1.0: the verdict waits for its exit, not for the loops. (Judged
    at once, with the wait switched off, it scored 0.0 in 8 of 8 tries here: the
    hog still held its memory; with it, 1.0 in 8 of 8 after 0.7-1.4 s.) The loops
    are a busy machine's, in a session from outside, and end 4 s after they began:
    left by the agent, they would be work left running (``nothing_new_running`` fails
    it). Loops kept through the whole verdict starved its restarts and pages too: on a
    machine busy with other work it scored 0.0 (once in ``make test``; 2 of 3 tries with
    two more busy loops, which now pass 3 of 3)."""
    with Episode(load_catalog()["easy_4"], 1, client=client, images=images, run_id=test_run_id) as ep:
        pid = ep.faults[0].seeded["pid"]
        ep.shell.run(f"taskset -p -c 0 {pid} && chrt -i -p 0 {pid}")
        busy = client.containers.get(ep.host.handle.container_id)
        busy.exec_run(["sh", "-c", STARVE_CPU0_BRIEFLY + "; wait"], detach=True)
        time.sleep(0.5)
        ep.shell.run(f"kill {pid}")
        verdict = ep.verify()
    assert verdict.reward == 1.0, [c.detail for c in verdict.checks]
    assert labelled(client, test_run_id) == []
