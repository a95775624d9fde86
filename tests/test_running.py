"""The gate "runs nothing the healthy host did not run" (``nothing_new_running``): each
process's shape is its executable, its command line (digits folded) and its ancestors';
sessions entered from outside, SSH connections, cron's jobs and init scripts' runs are
left out. It passes on a healthy host and on what the faults left, and fails naming
what the agent left running once its session ended."""

from __future__ import annotations

import time

import docker
import pytest
from test_inspector import host, image, in_host  # noqa: F401  (fixtures)

from fixos.core.models import CommandResult
from fixos.stack.inspector import HOST_ROOT
from fixos.stack.judge import Judge
from fixos.verifier import CHECKS, Probe, backend
from fixos.verifier.running import shapes


class _Canned:
    def __init__(self, output: str) -> None:
        self.output = output

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        return CommandResult(command=command, exit_code=0, output=self.output, duration=0.0)


_PS = """\
  1     0 Ss   init [2]
 40     1 Ss   /usr/sbin/cron -f
 41    40 S    /usr/sbin/CRON -f
 42    41 Ss   /bin/sh -c [ -x /usr/lib/php/sessionclean ] && /usr/lib/php/sessionclean
 50     1 Ss   nginx: master process /usr/sbin/nginx
 51    50 S    nginx: worker process
 52    50 S    nginx: worker process is shutting down
 60     1 Ss   sshd: /usr/sbin/sshd [listener] 1 of 10-100 startups
 61    60 Ss   sshd: root@notty
 62    61 S    bash -c while :; do sleep 1; done
 70     1 S    /bin/bash /etc/init.d/mariadb start
 71    70 S    sleep 1
 80     0 Ss   bash
 81    80 S    sleep 1000
 82    81 S    sleep 5
 90     1 S    bash -c while :; do /bin/true; done
 91    90 Z    [true] <defunct>
"""
_EXES = {
    1: "/usr/sbin/init",
    40: "/usr/sbin/cron",
    41: "/usr/sbin/cron",
    42: "/usr/bin/dash",
    50: "/usr/sbin/nginx",
    51: "/usr/sbin/nginx",
    52: "/usr/sbin/nginx",
    60: "/usr/sbin/sshd",
    61: "/usr/sbin/sshd",
    62: "/usr/bin/bash",
    70: "/usr/bin/bash",
    71: "/usr/bin/sleep",
    80: "/usr/bin/bash",
    81: "/usr/bin/sleep",
    82: "/usr/bin/sleep",
    90: "/usr/bin/bash",
}
_WALKED = _PS + "--\n" + "".join(f"/proc/{pid} {exe}\n" for pid, exe in _EXES.items())


def test_shapes_leave_out_sessions_connections_jobs_and_init_scripts() -> None:
    probe = Probe(None, _Canned(_WALKED), None, root=HOST_ROOT)  # type: ignore[arg-type]
    found, adopted = shapes(probe)
    assert sorted(found) == [
        "/usr/bin/bash bash -c while :; do /bin/true; done",  # the loop init adopted
        "/usr/sbin/cron /usr/sbin/cron -f",
        "/usr/sbin/nginx nginx: master process /usr/sbin/nginx",
        "/usr/sbin/sshd sshd: /usr/sbin/sshd [listener] N of N-N startups",
    ]
    assert found["/usr/bin/bash bash -c while :; do /bin/true; done"].pid == 90
    assert adopted["/usr/sbin/cron /usr/sbin/cron -f"] == 1
    assert (
        "/usr/sbin/nginx nginx: worker process < /usr/sbin/nginx nginx: master process /usr/sbin/nginx"
        not in adopted
    )
    # what the session entered from outside started, as init would adopt it (the faults')
    found, _ = shapes(probe, recording=True)
    assert "/usr/bin/sleep sleep N" in found
    assert "/usr/bin/bash bash" not in found  # the session itself is no process of the host


def test_a_new_shape_and_an_extra_copy_fail_naming_them() -> None:
    check = CHECKS.get("nothing_new_running")(CHECKS.get("nothing_new_running").Params())
    healthy = _WALKED.replace(" 90     1 S    bash -c while :; do /bin/true; done\n", "")
    baseline = check.snapshot(Probe(None, _Canned(healthy), None, root=HOST_ROOT))  # type: ignore[arg-type]
    assert check.evaluate(Probe(None, _Canned(healthy), None, root=HOST_ROOT), baseline).passed  # type: ignore[arg-type]
    outcome = check.evaluate(Probe(None, _Canned(_WALKED), None, root=HOST_ROOT), baseline)  # type: ignore[arg-type]
    assert not outcome.passed
    assert outcome.detail == "left running: pid 90 /usr/bin/bash (bash -c while :; do /bin/true; done)"
    second_cron = (
        _WALKED.replace(" 90     1 S", " 43     1 S    /usr/sbin/cron -f\n 90   999 S")
        + "/proc/43 /usr/sbin/cron\n"
    )
    outcome = check.evaluate(Probe(None, _Canned(second_cron), None, root=HOST_ROOT), baseline)  # type: ignore[arg-type]
    assert not outcome.passed and "2 of '/usr/sbin/cron -f' (healthy: 1)" in outcome.detail, outcome.detail
    # a listing cut short (no init in it) is no reading: the check fails, never passes empty
    with pytest.raises(RuntimeError, match="could not list"):
        check.evaluate(Probe(None, _Canned(""), None, root=HOST_ROOT), baseline)  # type: ignore[arg-type]
    # the exported verifier (inside the host) does not judge this
    assert check.snapshot(Probe(None, _Canned(_WALKED), None, root="")) is None  # type: ignore[arg-type]


def test_a_faults_child_adopted_once_the_repair_killed_its_parent_is_the_faults() -> None:
    """medium_6: the fault's watchdog loop runs under the harness's session; the repair kills
    it while its ``sleep 2.0`` still runs, which init then adopts: a shape the faults had."""
    check = CHECKS.get("nothing_new_running")(CHECKS.get("nothing_new_running").Params())
    loop = " 83    80 S    bash -c while :; do pkill nginx; sleep 2.0; done\n 84    83 S    sleep 2.0\n"
    exes = "/proc/83 /usr/bin/bash\n/proc/84 /usr/bin/sleep\n"
    healthy = _WALKED.replace(" 90     1 S    bash -c while :; do /bin/true; done\n", "")
    faulty = healthy.replace("--\n", loop + "--\n") + exes
    baseline = check.snapshot(Probe(None, _Canned(healthy), None, root=HOST_ROOT))  # type: ignore[arg-type]
    baseline = check.refine(Probe(None, _Canned(faulty), None, root=HOST_ROOT), baseline)  # type: ignore[arg-type]
    repaired = healthy.replace("--\n", " 84     1 S    sleep 2.0\n--\n") + exes
    outcome = check.evaluate(Probe(None, _Canned(repaired), None, root=HOST_ROOT), baseline)  # type: ignore[arg-type]
    assert outcome.passed, outcome.detail
    other = repaired.replace(" 84     1 S    sleep 2.0", " 84     1 S    sleep infinity")
    assert not check.evaluate(Probe(None, _Canned(other), None, root=HOST_ROOT), baseline).passed  # type: ignore[arg-type]


class _Looks:
    """A host's processes seen differently at each look (the last one again after)."""

    def __init__(self, *outputs: str) -> None:
        self.outputs = list(outputs)
        self.looks = 0

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        output = self.outputs[min(self.looks, len(self.outputs) - 1)]
        self.looks += 1
        return CommandResult(command=command, exit_code=0, output=output, duration=0.0)


def test_a_faults_loop_caught_between_its_sleeps_is_looked_at_again() -> None:
    """hard_4: the batch job's retrying loops run ``sleep 0.2`` between refused clients; a
    record that caught both in a client (2 of 100 looks, quiet) named the sleep "left running"
    for a repair that left the job to the scenario's check (CI: partial scored 0.0). The faults'
    record looks twice; a host where the faults run nothing is looked at once."""
    check = CHECKS.get("nothing_new_running")(CHECKS.get("nothing_new_running").Params())
    healthy = _WALKED.replace(" 90     1 S    bash -c while :; do /bin/true; done\n", "")
    job = " 83     1 S    /bin/sh /opt/sales-report\n 84    83 S    /bin/sh /opt/sales-report\n"
    client = " 85    84 S    mariadb -u reports -px shop -e SELECT SLEEP(86400)\n"
    exes = "/proc/83 /usr/bin/dash\n/proc/84 /usr/bin/dash\n/proc/85 /usr/bin/mariadb\n"
    between = healthy.replace("--\n", job + client + "--\n") + exes
    napping = " 85    84 S    sleep 0.2\n"
    sleeping = healthy.replace("--\n", job + napping + "--\n") + exes.replace("mariadb", "sleep")
    quiet = _Looks(healthy)
    baseline = check.snapshot(Probe(None, quiet, None, root=HOST_ROOT))  # type: ignore[arg-type]
    assert check.refine(Probe(None, quiet, None, root=HOST_ROOT), baseline) == baseline  # type: ignore[arg-type]
    assert quiet.looks == 2  # the snapshot's and one for the faults
    faulty = _Looks(between, sleeping)
    refined = check.refine(Probe(None, faulty, None, root=HOST_ROOT), baseline)  # type: ignore[arg-type]
    assert faulty.looks == 2
    outcome = check.evaluate(Probe(None, _Canned(sleeping), None, root=HOST_ROOT), refined)  # type: ignore[arg-type]
    assert outcome.passed, outcome.detail
    # what the faults never ran is still new
    other = sleeping.replace("sleep 0.2", "sleep infinity")
    assert not check.evaluate(Probe(None, _Canned(other), None, root=HOST_ROOT), refined).passed  # type: ignore[arg-type]


class _Host:
    """A host's outside access with only what the gate asks of it."""

    def __init__(self, boot_sessions: set[int]) -> None:
        self.boot_sessions = boot_sessions


def test_the_harness_session_a_boot_opened_is_left_out_while_open_and_judged_after() -> None:
    """``fixos.shells.boot``: the harness's first session is init's child, named by its PID
    while open (``LiveHost.boot_sessions``); a shell of the same shape once it ended, or
    under another PID, is judged as any program is."""
    check = CHECKS.get("nothing_new_running")(CHECKS.get("nothing_new_running").Params())
    healthy = _WALKED.replace(" 90     1 S    bash -c while :; do /bin/true; done\n", "")
    session = " 7     1 Ss   bash --noprofile --norc\n 8     7 S    sleep 3\n"
    exes = "/proc/7 /usr/bin/bash\n/proc/8 /usr/bin/sleep\n"
    booted = healthy.replace("--\n", session + "--\n") + exes
    open_ = _Host({7})
    baseline = check.snapshot(Probe(None, _Canned(booted), open_, root=HOST_ROOT))  # type: ignore[arg-type]
    assert not any("--noprofile" in shape for shape in baseline["shapes"]), baseline["shapes"]
    assert check.evaluate(Probe(None, _Canned(booted), open_, root=HOST_ROOT), baseline).passed  # type: ignore[arg-type]
    # the same processes once the harness closed its session (an agent's copy of its shape)
    outcome = check.evaluate(Probe(None, _Canned(booted), _Host(set()), root=HOST_ROOT), baseline)  # type: ignore[arg-type]
    assert not outcome.passed and "pid 7 /usr/bin/bash (bash --noprofile --norc)" in outcome.detail
    outcome = check.evaluate(Probe(None, _Canned(booted), _Host({9}), root=HOST_ROOT), baseline)  # type: ignore[arg-type]
    assert not outcome.passed


# -- on a live host -------------------------------------------------------------


def _adopted(client: docker.DockerClient, host, command: str) -> None:  # noqa: F811
    """Run ``command`` in a session that then ends, and wait until init adopted what it left."""
    code, out = in_host(client, host, f"{command}\ntrue")
    assert code == 0, out
    time.sleep(0.3)


@pytest.mark.live
def test_what_a_session_left_running_fails_once_the_session_ended(client, host, image, test_run_id):  # noqa: F811
    check = CHECKS.get("nothing_new_running")(CHECKS.get("nothing_new_running").Params())
    with Judge(client, image, run_id=test_run_id) as judge:
        shell = judge.session(host)
        try:
            probe = Probe(backend.testinfra_host(shell, host.name), shell, host, root=HOST_ROOT)
            baseline = check.snapshot(probe)
            healthy = check.evaluate(probe, check.refine(probe, baseline))
            assert healthy.passed, healthy.detail
            # a fault's own process (a decoy, a hog) is the scenario's to judge
            _adopted(client, host, "nohup sleep 900 </dev/null >/dev/null 2>&1 &")
            baseline = check.refine(probe, baseline)
            assert check.evaluate(probe, baseline).passed
            # a service restarted through its init script, cron's own work: not new
            _adopted(client, host, "service nginx restart >/dev/null; service cron restart >/dev/null")
            outcome = check.evaluate(probe, baseline)
            assert outcome.passed, outcome.detail
            # a sleeper disguised as a PHP worker, holding a log open
            disguised = "nohup bash -c 'exec -a \"php-fpm: pool www\" sleep 600' </dev/null"
            disguised += " >>/var/log/nginx/access.log 2>&1 &"
            _adopted(client, host, disguised)
            outcome = check.evaluate(probe, baseline)
            assert not outcome.passed
            assert (
                outcome.detail.startswith("left running: pid ")
                and "/usr/bin/sleep (php-fpm: pool www 600)" in outcome.detail
            )
        finally:
            shell.close()


def test_the_programs_gate_leaves_out_what_cron_runs_for_a_job() -> None:
    """``processes_intact`` recorded Debian's php sessionclean (php8.2, sort), which cron runs
    at :09 and :39, on a healthy host, and it had ended by the healthy proof."""
    listing = (
        "1 0 init\n40 1 cron\n41 40 cron\n42 41 sh\n43 42 sessionclean\n44 43 php8.2\n45 43 sort\n"
        "50 1 nginx\n51 50 nginx\n60 0 bash\n61 60 log-shipper\n"
    )
    check = CHECKS.get("processes_intact")(CHECKS.get("processes_intact").Params())
    recorded = check.snapshot(Probe(None, _Canned(listing), None))  # type: ignore[arg-type]
    assert recorded == ["cron", "init", "log-shipper", "nginx"]  # a decoy the harness started stays
