"""The final verdict's durability phase (``fixos.episodes.durability``): judged as left, every
service restarted through its init script, judged again; each service's main process
held for a window. Unit tests on the combining rules; live tests show a repair that
lasts only until the next restart, and a restart loop fighting a watchdog, earn nothing,
while the running score (``progress``) skips the restarts, and so does a final verdict
already 0.0 as left."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import docker
import pytest

from fixos.core.models import CheckResult, Verdict
from fixos.episodes.durability import (
    AFTER_RESTARTS,
    AS_LEFT,
    NOT_ASKED_AGAIN,
    STABLE_CHECK,
    TICKS,
    Reading,
    both_phases,
    durable_verdict,
    held_for,
    hold_left,
    main_processes,
    stability,
)
from fixos.episodes.episode import Episode, run_episode
from fixos.episodes.restarts import restart_services
from fixos.records.models import EpisodeRecord
from fixos.records.saved import read_lines, write_lines
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.solution import render
from fixos.stack.hosts import LiveHost
from fixos.verifier.verify import reward_of

CATALOG = load_catalog()


def result(name: str, passed: bool, *, scored: bool = True, detail: str = "") -> CheckResult:
    return CheckResult(name, "t", passed, scored, 1.0, detail or ("ok" if passed else "bad"))


# -- combining the phases ---------------------------------------------------------------------


def test_a_check_passes_only_if_it_passes_in_both_phases() -> None:
    first = Verdict(1.0, [result("a", True), result("b", True), result("c", False, detail="down")])
    second = Verdict(
        0.0, [result("a", True), result("b", False, detail="gone"), result("c", False, detail="x")]
    )
    verdict = both_phases(first, second)
    by_name = {c.name: c for c in verdict.checks}
    assert by_name["a"].passed and by_name["a"].failed_in == ""
    assert not by_name["b"].passed and by_name["b"].failed_in == AFTER_RESTARTS
    assert by_name["b"].detail == "after the restarts: gone"
    assert by_name["c"].failed_in == "both" and by_name["c"].detail == "as left: down; after the restarts: x"
    assert verdict.reward == pytest.approx(1 / 3, abs=1e-3)
    assert verdict.phases == {AS_LEFT: first.checks, AFTER_RESTARTS: second.checks}


def test_a_check_failed_as_left_and_not_asked_again_stays_failed() -> None:
    """The judgement after the restarts leaves out what failed as left (``durable_verdict``):
    it is failed as left, says it was not asked again, and the reward is what asking gave."""
    first = Verdict(0.5, [result("a", True), result("c", False, detail="503 after 3 s")])
    asked = both_phases(first, Verdict(1.0, [result("a", True), result("c", False, detail="503")]))
    skipped = both_phases(first, Verdict(1.0, [result("a", True)]))
    [c] = [c for c in skipped.checks if c.name == "c"]
    assert not c.passed and c.failed_in == AS_LEFT
    assert c.detail == f"as left: 503 after 3 s; {NOT_ASKED_AGAIN}"
    assert skipped.reward == asked.reward == 0.5


def test_a_gate_failing_after_the_restarts_zeroes_the_reward() -> None:
    first = Verdict(1.0, [result("a", True), result("gate", True, scored=False)])
    second = Verdict(0.0, [result("a", True), result("gate", False, scored=False)])
    assert both_phases(first, second).reward == 0.0
    stable = stability({"web": {"nginx": "10@5"}}, {"web": {"nginx": "10@5"}}, 1.0)
    assert both_phases(first, first, [stable]).reward == 1.0


class _NeverRestarted:
    """A host that fails the test if anything restarts or reads it."""

    def run_program(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("restarted a host whose reward was 0.0 as left")

    def read_files(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("held a host whose reward was 0.0 as left")


def test_a_reward_of_zero_as_left_is_final_without_restarts() -> None:
    """No restart can raise 0.0 (each check must pass in both phases): a failing episode
    pays for one judgement, not the restarts (up to 30 s on a MariaDB that cannot start)."""
    asked = []
    as_left = Verdict(0.0, [result("a", False), result("gate", True, scored=False)])
    verdict = durable_verdict(
        lambda holding, _: asked.append(holding) or as_left,
        {"web": _NeverRestarted()},
        {"web": ["nginx", "mariadb"]},  # type: ignore[dict-item]
    )
    assert asked == [False] and verdict.reward == 0.0 and verdict.restarts == {}
    assert verdict.phases == {AS_LEFT: as_left.checks}
    [stable] = [c for c in verdict.checks if c.name == STABLE_CHECK]
    assert stable.detail.startswith("not judged")
    partial = Verdict(0.5, [result("a", False), result("b", True)])
    with pytest.raises(AssertionError, match="restarted"):  # anything above 0.0 is restarted
        durable_verdict(lambda *_: partial, {"web": _NeverRestarted()}, {"web": ["nginx"]})  # type: ignore[dict-item]


def test_stability_wants_the_same_live_main_process_at_both_ends() -> None:
    same = stability(
        {"web": {"nginx": "10@5", "ssh": "20@6"}}, {"web": {"nginx": "10@5", "ssh": "20@6"}}, 1.2
    )
    assert same.passed and not same.scored and same.name == STABLE_CHECK
    replaced = stability({"web": {"nginx": "10@5"}}, {"web": {"nginx": "31@90"}}, 1.2)
    assert not replaced.passed and "pid 10 -> 31" in replaced.detail
    reused_pid = stability({"web": {"nginx": "10@5"}}, {"web": {"nginx": "10@95"}}, 1.2)
    assert not reused_pid.passed
    died = stability({"web": {"nginx": "10@5"}}, {"web": {"nginx": ""}}, 1.2)
    assert not died.passed and "died" in died.detail
    appeared = stability({"web": {"nginx": ""}}, {"web": {"nginx": "44@9"}}, 1.2)
    assert not appeared.passed and "not from its init script" in appeared.detail
    # down at both ends: the scenario's checks judge whether it must run (partial credit survives)
    never = stability({"web": {"nginx": "", "ssh": "20@6"}}, {"web": {"nginx": "", "ssh": "20@6"}}, 1.2)
    assert never.passed and "left to the other checks): nginx" in never.detail
    two_hosts = stability({"web": {"nginx": "1@1"}, "db": {"mariadb": "2@2"}}, {"web": {"nginx": "1@1"}}, 1.0)
    assert not two_hosts.passed and "db/mariadb" in two_hosts.detail


def test_a_service_a_returning_fault_acts_on_is_left_to_the_checks_whenever_its_round_falls() -> None:
    """A watchdog the repair left kills nginx inside the window on one seed, after it on
    another: either way the gate says the same, and the scenario's checks judge nginx."""
    acted_on = {"web": {"nginx"}}
    for after in ("", "31@90", "10@5"):
        verdict = stability(
            {"web": {"nginx": "10@5", "ssh": "2@2"}},
            {"web": {"nginx": after, "ssh": "2@2"}},
            1.0,
            None,
            acted_on,
        )
        assert verdict.passed, verdict.detail
    died = stability({"web": {"nginx": "10@5"}}, {"web": {"nginx": ""}}, 1.0, None, acted_on)
    assert "a fault keeps acting on (left to the scenario's checks): nginx" in died.detail
    other = stability({"web": {"ssh": "2@2"}}, {"web": {"ssh": ""}}, 1.0, None, acted_on)
    assert not other.passed  # only what the fault acts on


def test_only_faults_that_keep_acting_leave_their_services_to_the_checks() -> None:
    from fixos.injector.conflicts import kept_down_by_returning
    from fixos.scenarios.catalog import load_catalog

    catalog = load_catalog()
    entries = lambda sid: [(catalog[sid].host_of(f), f.type, f.params) for f in catalog[sid].faults]  # noqa: E731
    assert kept_down_by_returning(entries("medium_6")) == {"web": {"nginx"}}  # the watchdog
    assert kept_down_by_returning(entries("cron_1")) == {"web": {"php8.2-fpm"}}
    assert kept_down_by_returning(entries("easy_1")) == {}  # stopped once: the hold judges it


def _aged(uptime: float, **ages: float) -> Reading:
    """A reading at ``uptime`` of main processes that have lived ``ages`` seconds by then."""
    return Reading(
        {s: f"{10 + i}@{round((uptime - age) * TICKS)}" for i, (s, age) in enumerate(ages.items())}, uptime
    )


def test_the_hold_counts_from_each_main_process_start_not_from_the_last_restart() -> None:
    """A process started early in the restarts has lived part of the hold by the first
    reading: only the youngest sets what is left to wait, after the second judgement."""
    reading = _aged(100.0, nginx=0.7, mariadb=0.2)
    assert hold_left({"web": reading}, 1.0, since=0.0) == pytest.approx(0.8, abs=0.02)
    assert hold_left({"web": reading}, 1.0, since=0.5) == pytest.approx(0.3, abs=0.02)
    assert hold_left({"web": reading}, 1.0, since=0.9) < 0  # the judgement outlasted the hold
    # a service down at the first reading is watched from there, for the whole hold
    down = Reading({"nginx": "", "ssh": "20@6"}, 100.0)
    assert hold_left({"web": down}, 1.0, since=0.25) == pytest.approx(0.75)
    # no clock (the host's uptime unread): the window opens at the reading, as before
    assert hold_left({"web": Reading({"nginx": "10@5"}, None)}, 1.0, since=0.0) == pytest.approx(1.0)
    # two hosts: the youngest anywhere
    assert hold_left({"web": reading, "db": _aged(100.0, mariadb=0.05)}, 1.0, 0.0) == pytest.approx(
        0.95, abs=0.02
    )


def test_held_for_says_how_long_the_youngest_kept_process_lived() -> None:
    first = _aged(100.0, nginx=0.7, mariadb=0.2)
    last = Reading(first.processes, 100.9)
    assert held_for({"web": first}, {"web": last}, 0.9) == pytest.approx(1.1, abs=0.02)
    # a service down at the first reading was watched only between the readings
    gone = Reading({**first.processes, "ssh": ""}, 100.0)
    assert held_for({"web": gone}, {"web": Reading(gone.processes, 101.0)}, 1.0) == pytest.approx(1.0)
    # replaced processes do not count: stability fails them
    replaced = Reading({"nginx": "99@1", "mariadb": first.processes["mariadb"]}, 100.9)
    assert held_for({"web": first}, {"web": replaced}, 0.9) == pytest.approx(1.1, abs=0.02)


def test_a_two_phase_verdict_survives_the_journal_and_an_older_line_still_reads(tmp_path: Path) -> None:
    verdict = both_phases(Verdict(1.0, [result("a", True)]), Verdict(0.0, [result("a", False)]))
    verdict.restarts["web/nginx"] = "failed: not up"
    record = EpisodeRecord(
        run_id="r", episode_id="e", scenario="medium_1", difficulty="medium", seed=1, agent="a",
        status="scored", reward=verdict.reward, solved=False, steps=0, timings={}, verdict=verdict,
    )  # fmt: skip
    path = tmp_path / "episodes.jsonl"
    write_lines(path, [record])
    back = read_lines(EpisodeRecord, path)[0]
    assert back.verdict == verdict and back.verdict.checks[0].failed_in == AFTER_RESTARTS
    line = json.loads(path.read_text())
    del line["verdict"]["phases"], line["verdict"]["restarts"], line["verdict"]["checks"][0]["failed_in"]
    path.write_text(json.dumps(line) + "\n")
    older = read_lines(EpisodeRecord, path)[0]
    assert (
        older.verdict is not None and older.verdict.phases == {} and older.verdict.checks[0].failed_in == ""
    )


# -- live ---------------------------------------------------------------------------------------


@pytest.mark.live
def test_restarts_go_through_the_init_scripts_and_give_new_main_processes(
    live_host: LiveHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All of a host's restarts in one engine exec (``side_by_side``), each timed apart."""
    services = ["nginx", "mariadb", "php8.2-fpm", "ssh"]
    before = main_processes(live_host, services).processes
    assert all(before.values()), before
    runs: list[list[str]] = []
    run_program = live_host.run_program

    def counted(argv, *args, **kwargs):
        runs.append(argv)
        return run_program(argv, *args, **kwargs)

    monkeypatch.setattr(live_host, "run_program", counted)
    restarts = restart_services({"web": live_host}, {"web": services})
    monkeypatch.undo()
    assert all(r.result.ok for r in restarts), [r.line for r in restarts]
    assert len(runs) == 1 and [r.service for r in restarts] == services, runs
    assert len({r.result.duration for r in restarts}) > 1  # each decided on its own
    after = main_processes(live_host, services)
    assert all(after.processes.values()), after
    assert all(after.processes[s] != before[s] for s in services), (before, after)
    # each new main process is young on the kernel's clock, which the host's uptime reads
    assert all(0.0 <= after.age(s) < 60 for s in services) and after.uptime is not None
    assert live_host.http_get(80, "/status").status == 200


@pytest.mark.live
def test_restarts_still_wait_where_bash_cannot_make_its_pipe(live_host: LiveHost) -> None:
    """The restarts' polls sleep by ``read -t`` on a pipe made through ``/dev/fd``, which lies
    outside every layer the gates read: with it removed (root may), each poll forks ``sleep``
    again, and every service comes up as it did, never given up on by a poll that did not wait."""
    services = ["nginx", "mariadb", "php8.2-fpm", "ssh"]
    gone = live_host.run_program(["/bin/sh", "-c", "rm /dev/fd && ! test -e /dev/fd"])
    assert gone.ok, gone.output
    try:
        restarts = restart_services({"web": live_host}, {"web": services})
        assert all(r.result.ok for r in restarts), [r.line for r in restarts]
        assert all(r.result.duration > 0.1 for r in restarts), [r.line for r in restarts]
        assert live_host.http_get(80, "/status").status == 200
    finally:
        live_host.run_program(["/bin/sh", "-c", "ln -sfn /proc/self/fd /dev/fd"])


_REPLACER = r"""
old=$(cat /run/nginx.pid)
while [ "$(cat /run/nginx.pid 2>/dev/null)" = "$old" ] || [ ! -s /run/nginx.pid ]; do sleep 0.02; done
for i in 1 2 3 4 5 6 7 8; do
  sleep 0.4; kill -9 "$(cat /run/nginx.pid 2>/dev/null)"; rm -f /run/nginx.pid; nginx
done
"""
# A loop rather than one kill: whichever nginx the hold's first reading sees (the restart's,
# or one the loop already made), it is replaced or dead within its first second, whatever
# the machine's load does to the two readings' times.


@pytest.mark.live
def test_the_hold_sees_a_main_process_replaced_within_a_second_of_its_start(live_host: LiveHost) -> None:
    """A watchdog no other gate saw (here the judgement is stubbed at 1.0) replaces nginx
    every 0.4 s once it was restarted. Counted from the start of the restarted process, the hold
    still outlasts that; with nobody replacing it, the same phase passes and says how long
    the youngest process was held."""
    judged = Verdict(0.5, [result("a", True), result("b", False)])
    services = {"web": ["nginx", "php8.2-fpm"]}
    asked: list[tuple[bool, frozenset[str]]] = []
    kept = durable_verdict(lambda *a: asked.append(a) or judged, {"web": live_host}, services)
    # the checks' own holds: in the judgement after the restarts only, which leaves out
    # what failed as left (it cannot count again)
    assert asked == [(False, frozenset()), (True, frozenset({"b"}))]
    [stable] = [c for c in kept.checks if c.name == STABLE_CHECK]
    assert stable.passed and kept.reward == 0.5, stable.detail
    held = float(stable.detail.split(" for ")[1].split("s")[0])
    assert held >= 1.0, stable.detail
    watchdog = f"setsid sh -c {shlex.quote(_REPLACER)} </dev/null >/dev/null 2>&1 &"
    assert live_host.run_program(["sh", "-c", watchdog]).ok
    replaced = durable_verdict(lambda *_: judged, {"web": live_host}, services)
    [stable] = [c for c in replaced.checks if c.name == STABLE_CHECK]
    assert not stable.passed and replaced.reward == 0.0, stable.detail
    assert "nginx" in stable.detail and any(
        w in stable.detail for w in ("replaced within", "died within", "came up within")
    ), stable.detail


@pytest.mark.live
def test_a_start_that_failed_is_known_from_evidence_not_from_the_init_scripts_poll(
    live_host: LiveHost,
) -> None:
    """MariaDB with a broken option file: mariadbd exits at once, mysqld_safe gives up and
    says so in the error log, and Debian's init script goes on polling for 30 s. The
    restart is decided failed as soon as no MariaDB process lives and the log says why;
    the init script is left to finish in the background."""
    cnf = "/etc/mysql/mariadb.conf.d/50-server.cnf"
    assert live_host.run_program(["sh", "-c", f"printf 'no_such_option = 1\\n' >> {cnf}"]).ok
    [restart] = restart_services({"web": live_host}, {"web": ["mariadb"]})
    assert not restart.result.ok and restart.line.startswith("failed"), restart.line
    assert "error.log: " in restart.line and "no_such_option" in restart.line, restart.line
    assert restart.result.duration < 10, restart.line  # the script's own poll lasts 30 s
    polling = live_host.run_program(["pgrep", "-f", "^/bin/(ba)?sh /etc/init.d/mariadb start"])
    assert polling.ok, polling.output  # still polling, in the background
    # and a healthy restart still waits for what it waits for: the daemon up, the script ended
    assert live_host.run_program(["sh", "-c", f"sed -i '/^no_such_option/d' {cnf}"]).ok
    [again] = restart_services({"web": live_host}, {"web": ["mariadb"]})
    assert again.result.ok, again.line


@pytest.mark.live
def test_a_start_its_init_script_says_failed_is_not_given_the_grace(live_host: LiveHost) -> None:
    """nginx with a configuration it cannot load: its init script's config test fails, the
    script exits 1, no nginx process lives; the restart has failed then, without waiting out
    the grace a daemon gets to answer after a script that said it started."""
    conf = "/etc/nginx/nginx.conf"
    assert live_host.run_program(["sh", "-c", f"cp {conf} /root/nginx.conf && echo 'no_such;' >> {conf}"]).ok
    try:
        [restart] = restart_services({"web": live_host}, {"web": ["nginx"]})
    finally:
        assert live_host.run_program(["sh", "-c", f"cp /root/nginx.conf {conf}"]).ok
    assert not restart.result.ok, restart.line
    assert "exited 1 and none of its processes lives" in restart.line, restart.line
    [again] = restart_services({"web": live_host}, {"web": ["nginx"]})
    assert again.result.ok, again.line


@pytest.mark.live
def test_a_repair_undone_on_disk_earns_nothing_though_it_serves_until_the_restart(
    client: docker.DockerClient, images: dict[str, str], test_run_id: str
) -> None:
    """medium_1: nginx repaired and started, then the broken file put back on disk. The
    running nginx serves every page and the file is exactly as the fault left it, so
    everything as left passes; the restart through the init script fails."""
    scenario = CATALOG["medium_1"]
    with Episode(scenario, 1, client=client, images=images, run_id=test_run_id) as ep:
        broken = ep.faults[0].seeded["file"]
        assert ep.shell.run(f"cp -p {broken} /tmp/.broken").ok
        assert ep.shell.run(render(scenario.solution, ep.faults), timeout=60).ok
        assert ep.shell.run(f"cp -p /tmp/.broken {broken} && rm /tmp/.broken").ok
        assert ep.progress().reward == 1.0  # the running score skips the restarts
        verdict = ep.verify()
    assert reward_of(verdict.phases[AS_LEFT]) == 1.0
    assert verdict.reward == 0.0
    failed = {c.name: c.failed_in for c in verdict.checks if not c.passed}
    assert failed.get("nginx is running") == AFTER_RESTARTS, failed
    assert verdict.restarts["web/nginx"].startswith("failed"), verdict.restarts


@pytest.mark.live
@pytest.mark.parametrize(
    ("scenario", "agent"),
    [("medium_1", "adversary:private_config"), ("medium_6", "adversary:restart_loop")],
)
def test_a_repair_by_hand_or_by_loop_is_scored_low(
    client: docker.DockerClient, images: dict[str, str], test_run_id: str, scenario: str, agent: str
) -> None:
    record, _ = run_episode(CATALOG[scenario], 1, agent, client=client, images=images, run_id=test_run_id)
    assert record.scored, record.failure
    assert record.reward is not None and record.reward <= 0.2, record.verdict
    assert record.verdict is not None
    # a check whose wait the failed gate ended (``Probe.settled``) says so, and is not what decided
    failed = {c.name for c in record.verdict.checks if not c.passed and "not waited for" not in c.detail}
    if agent.endswith("restart_loop"):
        # the loop keeps nginx answering; the loop itself is what the healthy host did not
        # run, as left (a final 0.0: the hold's gate says it was not judged)
        assert "steady: runs nothing the healthy host did not run" in failed, record.verdict.checks
        # The fault's watchdog kills nginx every 2 s, the loop starts every service again
        # every 0.2 s, and during the durability phase it starts them beside the restarts: a
        # judgement may find nginx gone, or a daemon half-started or twice (of 32 runs, four
        # at a time, 30 failed only the gate above and 2 one of these too). Nothing else may fail.
        races = {"nginx is running", "steady: services run as their init scripts start them"}
        assert failed - races == {"steady: runs nothing the healthy host did not run"}, record.verdict.checks
