"""FixOS over OpenEnv: the official client drives whole episodes on live hosts, sessions stay
apart, idle ones are reaped with their containers, a report action is kept and graded when
the episode ends, and the plain endpoints, `openenv validate`, `inference.py` and `fixos
serve` work."""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import uvicorn
from helpers import ROOT, ChatServer, containers_owned_by, labelled, start_fixos, wait_for
from openenv.core.generic_client import GenericEnvClient
from pydantic import ValidationError

from fixos.diagnosis.truth import truth_report, truths
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.solution import render
from fixos.scenarios.worlds import split
from fixos.server import FixOSAction, FixOSEnv
from fixos.server.app import create_fixos_app
from fixos.server.client import PrepareStatus
from fixos.server.environment import FixOSEnvironment, ServerContext
from fixos.server.hostview import HostView, parse, probe_script
from fixos.server.models import DiskInfo, ProcessInfo, ServiceInfo
from fixos.server.monitor import Monitor
from fixos.server.rewards import TABLE, step_reward
from fixos.stack.leftovers import remove_labelled

CATALOG = load_catalog()
OPENENV = Path(sys.executable).parent / "openenv"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """The app on a free port in this process, so tests can reach the live episodes."""

    def __init__(
        self,
        client,
        images,
        run_id: str,
        *,
        max_sessions: int = 4,
        session_timeout: float = 300,
        warm: int = 0,
        catalog=CATALOG,
        step_seconds: float | None = None,
        prepare_ahead: int = 0,
    ):
        self.context = ServerContext(
            run_id=run_id,
            client=client,
            catalog=catalog,
            images=images,
            warm=warm,
            prepare_ahead=prepare_ahead,
        )
        self.app = create_fixos_app(
            self.context,
            max_sessions=max_sessions,
            session_timeout=session_timeout,
            step_seconds=step_seconds,
        )
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server = uvicorn.Server(
            uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> Served:
        self._thread.start()
        wait_for(lambda: self._server.started, timeout=20)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(20)
        self.context.close_all()

    def environment(self, episode_id: str) -> FixOSEnvironment:
        return next(e for e in self.context.environments if e.state.episode_id == episode_id)

    def http(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=300) as resp:  # a 3-host reset under load
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)


def oracle_command(served: Served, episode_id: str, task_id: str) -> str:
    """The reference repair of this very episode, read in-process: it never crosses the wire."""
    faults = served.environment(episode_id).episode.faults
    return f"bash -euo pipefail -c {shlex.quote(render(CATALOG[task_id].solution, faults))}"


# -- the reward table and the probe parser (no engine) ---------------------------------


def _view(*, services=(), procs=(), disks=()) -> HostView:
    return HostView(
        processes=[
            ProcessInfo(pid=p, user="root", cpu_percent=c, memory_mb=1, command="x") for p, c in procs
        ],
        services=[ServiceInfo(name=n, status=s) for n, s in services],
        disks=[
            DiskInfo(mount=m, size_mb=48, used_mb=u, used_percent=pc, inodes_used_percent=0)
            for m, u, pc in disks
        ],
    )


@pytest.mark.parametrize(
    ("command", "output", "before", "after", "progress", "solved", "expected"),
    [
        ("ps aux", "", _view(), _view(), (0, 0), False, {"explore": 0.1}),
        ("tail /var/log/nginx/error.log", "[emerg] unknown directive", _view(), _view(), (0, 0), False,
         {"explore": 0.1, "diagnose": 0.2}),
        ("sed -i 's/a/b/' /etc/nginx/nginx.conf", "", _view(), _view(), (0, 0), False, {"edit": 0.3}),
        ("kill 909", "", _view(procs=[(909, 99.0), (1, 0.0)]), _view(procs=[(1, 0.0)]), (0, 0), False,
         {"kill_hog": 0.3}),
        ("rm /var/log/big", "", _view(disks=[("/var/log", 47.0, 98.0)]),
         _view(disks=[("/var/log", 2.0, 5.0)]), (0, 0), False, {"free_disk": 0.3, "disk_normal": 0.5}),
        ("service nginx start", "", _view(services=[("nginx", "stopped")]),
         _view(services=[("nginx", "running")]), (0.0, 1.0), True,
         {"service_up": 0.5, "solved": 0.5, "progress": 0.4}),
        ("true", "", _view(), _view(), (0.5, 0.0), False, {"progress": -0.2}),
        ("perl -0777 -i -pe 's/a/b/' /etc/mysql/my.cnf", "", _view(), _view(), (0, 0), False, {"edit": 0.3}),
        ("service nginx status", "", _view(procs=[(909, 99.0)]), _view(), (0, 0), False, {"explore": 0.1}),
        ("sed -n 1,40p /etc/nginx/nginx.conf", "[emerg] unknown directive", _view(), _view(), (0, 0), False,
         {"explore": 0.1, "diagnose": 0.2}),
        ("awk '/error/' /var/log/nginx/error.log | tail -5", "", _view(), _view(), (0, 0), False,
         {"explore": 0.1}),
        ("sed -i.bak 's/a/b/' /etc/nginx/nginx.conf", "", _view(), _view(), (0, 0), False, {"edit": 0.3}),
    ],
)  # fmt: skip
def test_reward_table(command, output, before, after, progress, solved, expected):
    reward = step_reward(command, output, before, after, *progress, solved=solved)
    assert reward.parts == expected
    assert reward.value == round(min(1.0, max(0.0, sum(expected.values()))), 4)
    assert all(TABLE[k] == v for k, v in expected.items() if k != "progress")


def test_repeated_reading_earns_nothing():
    assert step_reward("ps aux", "", _view(), _view(), 0, 0, solved=False, repeated=True).value == 0.0


def test_an_action_is_a_command_a_report_or_both():
    assert FixOSAction(report={"healthy": True}).command_line() is None
    assert FixOSAction(command="DONE", report='{"healthy": true}').command_line() == "DONE"
    assert FixOSAction(command="ls", args=["a b"]).command_line() == "ls 'a b'"
    with pytest.raises(ValidationError, match="command: give a command, a report, or both"):
        FixOSAction()
    with pytest.raises(ValidationError, match="args: given without a command"):
        FixOSAction(args=["-l"], report={"healthy": True})


def test_probe_output_parses_into_a_view():
    out = "\n".join(
        [
            "@@uptime", "100.00", "@@stat", "909 (yes) R 1 1 1 0 -1 0 0 0 0 0 100 0 0 0",
            "@@uptime2", "100.50", "@@stat2", "909 (yes) R 1 1 1 0 -1 0 0 0 0 0 140 10 0 0",
            "@@ps", "  909     1 www-data  1024 yes spin", "@@svc", "nginx 3", "php8.2-fpm 0",
            "@@df", "tmpfs 49152 47000 2152 96% /var/log", "@@dfi", "tmpfs 4096 100 3996 3% /var/log",
            "@@mem", "134217728", "536870912", "@@end",
        ]
    )  # fmt: skip
    view = parse(out, None)
    assert view.processes == [
        ProcessInfo(pid=909, user="www-data", cpu_percent=100.0, memory_mb=1.0, command="yes spin")
    ]
    assert view.hogs == {909} and view.running == {"php8.2-fpm"}
    assert view.disks[0].used_percent == 96.0 and view.disks[0].inodes_used_percent == 3.0
    assert view.resources() == {
        "cpu_percent": 100.0,
        "memory_mb": 128.0,
        "memory_percent": 25.0,
        "disk_percent": 96.0,
    }
    assert parse("@@ps\n", None).error
    assert "sleep 0.5" in probe_script(["nginx"], first=True) and "sleep" not in probe_script(
        ["nginx"], first=False
    )


# -- live ------------------------------------------------------------------------------


class _ScriptOnly(Monitor):
    """The same monitor as a remote engine gets it: the probe script, run in the host."""

    def __init__(self, host, services) -> None:
        super().__init__(host, services)
        self._files = None


@pytest.mark.live
def test_the_monitor_read_from_here_sees_what_the_probe_script_sees(live_host):
    """The view built from the host's files read from this machine (no program of the host
    run) agrees with the probe script run in the host: processes and their owners, a hog,
    a stopped service, the disks and memory; and a forged ``ps`` hides nothing from it."""
    services = ["nginx", "mariadb", "php8.2-fpm", "ssh"]
    shell = live_host.shell(default_timeout=20)
    here, there = Monitor(live_host, services), _ScriptOnly(live_host, services)
    try:
        quiet = "</dev/null >/dev/null 2>&1 &"
        assert shell.run(
            f"setsid su -s /bin/sh www-data -c 'exec yes spin' {quiet} service nginx stop >/dev/null"
        ).ok
        ours, theirs = here.look(None), there.look(None)
        assert not ours.error and not theirs.error, (ours.error, theirs.error)
        # the script's own session and commands are not the host's: what else it lists, ours lists
        own = ("setsid --wait bash", "bash --noprofile", "ps -eo", "awk ", "/bin/sh /etc/init.d/", "service ")
        listed = {(p.pid, p.user, p.command) for p in theirs.processes if not p.command.startswith(own)}
        assert len(listed) >= 8 and listed <= {(p.pid, p.user, p.command) for p in ours.processes}, listed
        [spin] = [p for p in ours.processes if p.command == "yes spin"]
        assert spin.user == "www-data" and spin.pid in ours.hogs and spin.pid in theirs.hogs
        assert ours.running == theirs.running == {"mariadb", "php8.2-fpm", "ssh"}
        assert [d.mount for d in ours.disks] == [d.mount for d in theirs.disks] == ["/", "/var/log"]
        for a, b in zip(ours.disks, theirs.disks, strict=True):
            assert abs(a.used_percent - b.used_percent) <= 1 and abs(a.size_mb - b.size_mb) <= 1, (a, b)
        assert abs(ours.memory_mb - theirs.memory_mb) < 64 and ours.memory_mb > 0
        # later looks compare with the last one, and a forged ps changes nothing seen from here
        assert shell.run("printf '#!/bin/sh\\ntrue\\n' > /usr/local/bin/ps && chmod +x /usr/local/bin/ps").ok
        again = here.look(ours)
        assert spin.pid in again.hogs and not again.error
    finally:
        shell.run("pkill -x yes; service nginx start >/dev/null 2>&1; rm -f /usr/local/bin/ps")
        shell.close()
        here.close()
        there.close()


@pytest.mark.live
def test_official_client_oracle_solves_and_nop_does_not(client, images, test_run_id):
    with Served(client, images, test_run_id) as served, FixOSEnv(base_url=served.url).sync() as env:
        started = time.monotonic()
        result = env.reset(task_id="easy_1", seed=1)
        reset_s = time.monotonic() - started
        obs = result.observation
        assert not result.done and obs.task_id == "easy_1" and obs.task_difficulty == "easy"
        assert obs.task_score == 0.0 and obs.remaining_steps == CATALOG["easy_1"].limits.max_steps
        assert {s.name: s.status for s in obs.services}["nginx"] == "stopped"
        assert obs.processes and obs.disks and "disk_percent" in obs.resources
        state = env.state()
        assert len(state.containers) == 1 and labelled(client, test_run_id)

        started = time.monotonic()
        look = env.step(FixOSAction(command="service", args=["nginx", "status"]))
        step_s = time.monotonic() - started
        assert look.observation.exit_code == 3 and look.reward == pytest.approx(0.3) and not look.done

        fix = env.step(FixOSAction(command=oracle_command(served, state.episode_id, "easy_1")))
        assert fix.done and fix.observation.is_success_step and fix.observation.task_score == 1.0
        assert 0.0 <= fix.reward <= 1.0 and fix.observation.metadata["verdict"]["reward"] == 1.0
        assert env.state().final_score == 1.0 and env.state().containers == []
        assert labelled(client, test_run_id) == [], "a finished episode frees its host"

        idle = env.reset(task_id="easy_1", seed=2)
        assert idle.observation.task_score == 0.0
        done = env.step(FixOSAction(command="DONE"))
        assert done.done and done.observation.task_score == 0.0 and not done.observation.is_success_step
        assert env.state().final_score == 0.0
        print(f"reset via server {reset_s:.2f}s, step {step_s:.2f}s")


def test_the_client_takes_the_names_users_give_and_refuses_the_rest_before_sending(monkeypatch):
    monkeypatch.delenv("FIXOS_URL", raising=False)
    assert FixOSEnv().base_url == "http://127.0.0.1:8000", "where fixos serve listens by default"
    monkeypatch.setenv("FIXOS_URL", "http://127.0.0.1:9")  # nothing listens: nothing is sent
    env = FixOSEnv().sync()
    longest = max(s.limits.command_timeout for s in CATALOG.values())
    assert env._async._message_timeout > longest + 60, "the longest command, uncapped, and its judgement"
    with pytest.raises(TypeError, match="not scenario_idd"):
        env.reset(scenario_idd="easy_1")
    with pytest.raises(ValueError, match="task_id='easy_1' and scenario='hard_1' name different tasks"):
        env.reset(task_id="easy_1", scenario="hard_1")
    with pytest.raises(ValueError, match=r"rows\[1\]: name the task \(task_id or scenario or scenario_id\)"):
        env.prepare([{"scenario": "easy_1"}, {"seed": 2, "prompt": "..."}])
    with pytest.raises(TypeError, match="give rows, or one row"):
        env.prepare([{"scenario": "easy_1"}], n=4)
    with pytest.raises(TypeError, match="name the task"):
        env.prepare(seed=3)
    env.close()


@pytest.mark.live
def test_prepare_announces_a_row_and_its_reset_takes_the_episode_made_ready(client, images, test_run_id):
    with (
        Served(client, images, test_run_id, prepare_ahead=1) as served,
        FixOSEnv(base_url=served.url).sync() as env,
    ):
        nothing = PrepareStatus(ahead=1, waiting=0, preparing=0, ready=0, failed=0)
        assert env.prepare_status() == nothing
        with pytest.raises(RuntimeError, match="POST /prepare: 400 no task 'nope'"):
            env.prepare(scenario="nope")
        said = env.prepare(  # dataset rows: a report-only one is skipped, other columns ignored
            [
                {"scenario": "easy_1", "seed": 5, "prompt": "..."},
                {"task_id": "easy_1", "seed": 5, "task": "diagnose"},
            ]
        )
        assert said.skipped == 1 and said.waiting + said.preparing + said.ready == 1, said
        wait_for(lambda: env.prepare_status().ready == 1, timeout=120, delay=0.2)
        [ready] = [r.episode for rows in served.context.prepared._ready.values() for r in rows]
        first = env.reset(scenario="easy_1", seed=5).observation
        state = env.state()
        assert state.episode_id == ready.episode_id, "the reset took the episode prepared for its row"
        assert env.prepare_status() == nothing
        assert first.task_id == "easy_1" and first.task_score == 0.0
        assert {s.name: s.status for s in first.services}["nginx"] == "stopped"
        done = env.step(FixOSAction(command="service nginx start"))
        assert done.done and done.observation.task_score == 1.0
    with Served(client, images, test_run_id) as served, FixOSEnv(base_url=served.url).sync() as env:
        assert env.prepare_status().ahead == 0
        with pytest.raises(RuntimeError, match="start it with --prepare-ahead N"):
            env.prepare(task_id="easy_1")
    assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_a_report_action_is_kept_refused_naming_the_field_and_graded_when_the_episode_ends(
    client, images, test_run_id
):
    with Served(client, images, test_run_id) as served, FixOSEnv(base_url=served.url).sync() as env:
        env.reset(task_id="easy_1", seed=1)
        faults = served.environment(env.state().episode_id).episode.faults
        truth = truth_report(truths(faults))
        gremlins = {
            "healthy": False,
            "findings": [{"host": "web", "component": "service:nginx", "cause": "gremlins"}],
        }
        bad = env.step(FixOSAction(report=gremlins))
        said = bad.observation.report_error
        assert said is not None and said.startswith("report: findings.0.cause: cause 'gremlins' is none of")
        assert not bad.done and bad.reward == 0.0 and bad.observation.command_output == said
        assert bad.observation.exit_code is None and bad.observation.diagnosis is None

        kept = env.step(FixOSAction(report=json.dumps(truth)))  # a JSON object, or its text
        assert kept.observation.report_error is None and not kept.done
        assert kept.observation.command_output.startswith("[fixos: report kept (1 finding(s))")
        limit = CATALOG["easy_1"].limits.max_steps
        assert (env.state().step_count, env.state().remaining_steps) == (0, limit), (
            "a report alone runs nothing"
        )

        look = env.step(FixOSAction(command="service nginx status", report="{not json"))
        assert look.observation.exit_code == 3, "the command runs beside a report that is refused"
        assert look.observation.report_error.startswith("report: not JSON")

        done = env.step(FixOSAction(command="DONE"))
        assert done.done and done.observation.task_score == 0.0, "a report never changes the score"
        diagnosis = done.observation.diagnosis
        assert diagnosis is not None and (diagnosis.score, diagnosis.source, diagnosis.error) == (
            1.0,
            "agent",
            None,
        )
        assert diagnosis.per_fault == [
            {"type": "service_stopped", "host": "web", "finding": 0, "credit": 1.0}
        ]
        assert env.state().diagnosis == diagnosis and env.state().final_score == 0.0

        # a report with DONE in one action; then an episode with no report at all
        env.reset(task_id="easy_1", seed=2)
        assert env.state().diagnosis is None
        faults = served.environment(env.state().episode_id).episode.faults
        last = env.step(FixOSAction(command="DONE", report=truth_report(truths(faults))))
        assert last.done and last.observation.diagnosis.score == 1.0
        env.reset(task_id="easy_1", seed=3)
        silent = env.step(FixOSAction(command="DONE")).observation.diagnosis
        assert (silent.score, silent.source) == (0.0, "none")
        assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_a_level_draws_a_generated_train_world_and_auto_follows_the_sessions_results(
    client, images, test_run_id
):
    with Served(client, images, test_run_id) as served, FixOSEnv(base_url=served.url).sync() as env:
        first = env.reset(level="auto", seed=1).observation
        state = env.state()
        assert first.task_id.startswith("gen:1:") and split(first.task_id) == "train"
        assert (state.level, state.curriculum) == (1, "start") and first.instruction
        assert env.step(FixOSAction(command="DONE")).done  # a failure, recorded by the session's curriculum
        fixed = env.reset(level=3, seed=1).observation
        assert fixed.task_id.startswith("gen:3:") and split(fixed.task_id) == "train"
        assert (env.state().level, env.state().curriculum) == (3, "fixed")
        assert len(env.state().containers) == 3
        with pytest.raises(Exception, match="level"):
            env.reset(level=9)


@pytest.mark.live
def test_resets_take_warm_hosts_and_shutdown_removes_the_spares(client, images, test_run_id):
    with Served(client, images, test_run_id, warm=1) as served, FixOSEnv(base_url=served.url).sync() as env:
        assert labelled(client, test_run_id) == [], "no container before the first reset"
        env.reset(task_id="easy_1", seed=1)
        pool = served.context._pool
        wait_for(lambda: pool.ready_count(CATALOG["easy_1"].hosts) == 1, timeout=120)
        state = env.reset(task_id="easy_1", seed=2) and env.state()
        episode = served.environment(state.episode_id).episode
        assert episode.timings.boot < 0.5, "handed a booted host, not booted for this reset"
        fix = env.step(FixOSAction(command=oracle_command(served, state.episode_id, "easy_1")))
        assert fix.done and fix.observation.task_score == 1.0
    assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_four_sessions_stay_apart_and_a_fifth_is_refused(client, images, test_run_id):
    with Served(client, images, test_run_id, max_sessions=4) as served:
        envs = [FixOSEnv(base_url=served.url).sync() for _ in range(4)]
        try:
            for env in envs:
                env.connect()
            with ThreadPoolExecutor(4) as pool:
                results = list(
                    pool.map(lambda ie: ie[1].reset(task_id="easy_1", seed=ie[0] + 1), enumerate(envs))
                )
            assert all(not r.done for r in results)
            containers = [env.state().containers[0] for env in envs]
            assert len(set(containers)) == 4

            extra = FixOSEnv(base_url=served.url).sync()
            with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
                extra.connect()
                extra.reset(task_id="easy_1")
            extra.close()

            envs[0].step(FixOSAction(command="touch /tmp/only-in-session-0"))
            started = envs[0].step(FixOSAction(command="service nginx start"))
            assert started.done and started.observation.task_score == 1.0
            for env in envs[1:]:
                seen = env.step(FixOSAction(command="test -e /tmp/only-in-session-0"))
                assert seen.observation.exit_code == 1
                status = {s.name: s.status for s in seen.observation.services}
                assert status["nginx"] == "stopped" and seen.observation.task_score == 0.0
        finally:
            for env in envs:
                env.close()
        wait_for(lambda: labelled(client, test_run_id) == [], timeout=30)


@pytest.mark.live
def test_abandoned_sessions_are_reaped_with_their_containers(client, images, test_run_id):
    with Served(client, images, test_run_id, session_timeout=2) as served:
        code, body = served.http("POST", "/reset", {"task_id": "easy_1"})
        assert code == 200 and body["done"] is False
        assert labelled(client, test_run_id), "the plain-HTTP session's host"
        env = FixOSEnv(base_url=served.url).sync()
        env.connect()
        env.reset(task_id="easy_1", seed=2)  # then silence, with the socket still open
        # (the first session may already be reaped: a reset can take longer than the timeout)
        assert env.state().containers and labelled(client, test_run_id)
        wait_for(lambda: labelled(client, test_run_id) == [], timeout=40, delay=0.5)
        assert served.app.state.fixos.active_sessions == 0
        code, body = served.http("POST", "/step", {"action": {"command": "true"}})
        assert code == 404 and "POST /reset" in body["detail"]
        with pytest.raises(RuntimeError, match="closed"):
            env.step(FixOSAction(command="true"))
        env.close()


@pytest.mark.live
def test_plain_endpoints(client, images, test_run_id):
    with Served(client, images, test_run_id) as served:
        assert served.http("GET", "/health") == (
            200,
            {"status": "healthy", "active_sessions": 0, "max_sessions": 4},
        )
        code, tasks = served.http("GET", "/tasks")
        assert code == 200 and [t["id"] for t in tasks] == list(CATALOG)
        assert not any("solution" in t or "faults" in t for t in tasks)
        assert served.http("POST", "/reset", {"task_id": "nope"})[0] == 400
        assert served.http("POST", "/step", {"action": {"command": "true"}})[0] == 404

        code, reset = served.http("POST", "/reset", {"task_id": "easy_1", "seed": 3})
        assert code == 200 and reset["observation"]["task_id"] == "easy_1" and reset["reward"] == 0.0
        session = reset["session_id"]
        code, step = served.http("POST", "/step", {"action": {"command": "ps aux"}})
        assert code == 200 and step["session_id"] == session and step["reward"] == pytest.approx(0.1)
        assert served.http("POST", "/step", {"action": {"cmd": "x"}})[0] == 422
        code, body = served.http("POST", "/step", {"action": {"command": "true", "host": "nope"}})
        assert code == 400 and "no host 'nope'" in body["detail"]
        login = CATALOG["easy_1"].hosts[0].name
        code, step = served.http("POST", "/step", {"action": {"command": "hostname", "host": login}})
        assert code == 200 and step["observation"]["exit_code"] == 0
        code, step = served.http(
            "POST", "/step", {"session_id": session, "action": {"command": "service nginx start"}}
        )
        assert step["done"] is True and step["observation"]["task_score"] == 1.0
        code, state = served.http("GET", f"/state?session_id={session}")
        assert state["final_score"] == 1.0 and state["step_count"] == 3 and state["task_id"] == "easy_1"
        assert served.http("GET", "/health")[1]["active_sessions"] == 1
        assert served.http("POST", "/close", {})[1] == {"session_id": session, "closed": True}
        assert served.http("GET", "/health")[1]["active_sessions"] == 0


@pytest.mark.live
def test_openenv_validate_accepts_the_package_and_the_running_server(client, images, test_run_id):
    local = subprocess.run(
        [OPENENV, "validate", "--level", "static"], cwd=ROOT, capture_output=True, text=True
    )
    assert local.returncode == 0 and "PASS  static.manifest" in local.stdout, local.stdout + local.stderr
    with Served(client, images, test_run_id) as served:
        running = subprocess.run([OPENENV, "validate", "--url", served.url], capture_output=True, text=True)
    assert running.returncode == 0, running.stdout + running.stderr
    assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_inference_script_over_the_server(client, images, test_run_id):
    report = (
        '{"healthy": false, "findings": [{"host": "web", "component": "service:nginx", "cause": "oops"}]}'
    )
    chat = ChatServer(
        [
            "```bash\nservice nginx status\n```",
            f"```report\n{report}\n```",
            "```bash\nservice nginx start\n```",
        ]
    )
    env = dict(os.environ, API_BASE_URL=chat.url, MODEL_NAME="scripted-model", HF_TOKEN="hf-test")
    try:
        with Served(client, images, test_run_id) as served:
            env.update(FIXOS_URL=served.url, FIXOS_TASKS="easy_1")
            done = subprocess.run(
                [sys.executable, "inference.py"],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=180,
            )
    finally:
        chat.close()
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines == [
        "[START] task=easy_1 env=fixos model=scripted-model",
        '[STEP] step=1 action="service nginx status" exit=3 reward=0.30 done=false error=null',
        '[STEP] step=2 action="report" exit=null reward=0.00 done=false error="report: findings.0.cause: '
        "cause 'oops' is none of config_error, service_stopped, resource_exhaustion, port_conflict, "
        'permission, dependency, network_policy, certificate, scheduled_rebreaker, data_corruption"',
        '[STEP] step=2 action="service nginx start" exit=0 reward=1.00 done=true error=null',
        "[END] success=true steps=2 score=1.00 rewards=0.30,0.00,1.00",
    ]
    assert chat.requests[0]["auth"] == "Bearer hf-test"
    told = chat.requests[2]["messages"][-1]["content"]
    assert told.startswith("report: findings.0.cause:"), "the server's one line, handed back to the model"


@pytest.mark.live
def test_fixos_serve_removes_its_containers_on_sigterm(client, images):
    port = _free_port()
    proc = start_fixos("serve", "--port", str(port), "--max-sessions", "2", quiet=True)
    url = f"http://127.0.0.1:{port}"
    try:

        def up() -> bool:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    return True
            except OSError:
                return False

        wait_for(up, timeout=60, delay=0.3)
        request = urllib.request.Request(
            url + "/reset", data=b'{"task_id": "easy_1"}', headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=120) as resp:
            assert json.load(resp)["done"] is False
        # the session's host, and the warm spares the first reset started
        assert len(containers_owned_by(client, proc.pid)) >= 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) in (0, 130)
        assert containers_owned_by(client, proc.pid) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        for c in containers_owned_by(client, proc.pid):
            remove_labelled(client, run_id=c.labels["fixos.run"])


# -- timeouts: the generic client, idle time, reconnects -------------------------------


class ServerErrors(logging.Handler):
    """ERROR records of uvicorn's logger (an ASGI traceback is one). Attached once the server
    runs: uvicorn's logging setup replaces the handlers of its loggers."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []
        logging.getLogger("uvicorn.error").addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def close(self) -> None:
        logging.getLogger("uvicorn.error").removeHandler(self)
        super().close()


@pytest.mark.live
def test_a_long_step_is_cut_below_the_client_timeout_and_the_episode_stays(client, images, test_run_id):
    # Scaled down: the scenario allows a 60 s command, the generic client waits 30 s (60 s by
    # default), the server caps a step's command at 2 s (40 s by default); uncapped, `sleep 60`
    # would outlast the client and lose the episode (the next test).
    with (
        Served(client, images, test_run_id, step_seconds=2) as served,
        GenericEnvClient(base_url=served.url, message_timeout_s=120).sync() as env,
    ):
        env.reset(task_id="easy_1", seed=1)  # a boot under load may take longer than 30 s
        env._async._message_timeout = 30
        episode_id = env.state()["episode_id"]
        started = time.monotonic()
        long = env.step({"command": "sleep 60"})
        print(f"a step cut at 2 s answered in {time.monotonic() - started:.1f}s")
        assert long.observation["timed_out"] and long.observation["exit_code"] == 124 and not long.done
        look = env.step({"command": "service nginx status"})
        assert look.observation["exit_code"] == 3 and env.state()["episode_id"] == episode_id
        assert env.state()["step_count"] == 2 and labelled(client, test_run_id)


@pytest.mark.live
def test_a_client_that_reconnects_is_told_its_episode_is_gone(client, images, test_run_id):
    # No cap: a step outlives the client's patience, the client drops the socket and the
    # server ends that session and its episode; the client's next step opens a new session.
    with (
        Served(client, images, test_run_id, step_seconds=0) as served,
        GenericEnvClient(base_url=served.url, message_timeout_s=120).sync() as env,
    ):
        env.reset(task_id="easy_1", seed=1)  # a boot may take longer than the step's 2 s below
        errors = ServerErrors()
        env._async._message_timeout = 2
        with pytest.raises(TimeoutError):
            env.step({"command": "sleep 5"})
        env._async._message_timeout = 120
        with pytest.raises(RuntimeError, match="SESSION_LOST: this session holds no episode"):
            env.step({"command": "service nginx start"})
        wait_for(lambda: labelled(client, test_run_id) == [], timeout=30, delay=0.3)
        assert env.reset(task_id="easy_1", seed=2).observation["task_id"] == "easy_1"
    errors.close()
    assert [r.getMessage() for r in errors.records] == []


@pytest.mark.live
def test_think_time_is_not_episode_time_and_idle_sessions_last_their_limit(client, images, test_run_id):
    quick = CATALOG["easy_1"].model_copy(
        update={"limits": CATALOG["easy_1"].limits.model_copy(update={"wall_seconds": 2.0})}
    )
    with (
        Served(client, images, test_run_id, session_timeout=3, catalog={"easy_1": quick}) as served,
        FixOSEnv(base_url=served.url).sync() as env,
    ):
        env.reset(task_id="easy_1", seed=1)
        for _ in range(2):  # a model thinking 2.5 s per turn: 5 s in all, more than both limits
            time.sleep(2.5)
            step = env.step(FixOSAction(command="true"))
            assert not step.done and step.observation.exit_code == 0
        slow = env.step(FixOSAction(command="sleep 10"))  # commands do spend the episode's time
        assert slow.done and slow.observation.timed_out and env.state().final_score == 0.0
        assert served.app.state.fixos.active_sessions == 1
        wait_for(lambda: served.app.state.fixos.active_sessions == 0, timeout=15, delay=0.2)


@pytest.mark.live
def test_the_host_field_runs_on_a_named_host_of_a_multi_host_scenario(client, images, test_run_id):
    with Served(client, images, test_run_id) as served:
        code, reset = served.http("POST", "/reset", {"task_id": "split_1", "seed": 1})
        assert code == 200, reset
        assert len(served.http("GET", "/state")[1]["containers"]) == 3

        def step(command: str, host: str | None = None) -> int:
            code, body = served.http("POST", "/step", {"action": {"command": command, "host": host}})
            assert code == 200, body
            return body["observation"]["exit_code"]

        assert step("touch /tmp/seen-on-db", host="db") == 0
        assert step("test -e /tmp/seen-on-db", host="db") == 0
        assert step("test -e /tmp/seen-on-db") == 1, "no host named: the login host (web)"
        assert step("test -e /tmp/seen-on-db", host="app") == 1
        state = served.http("GET", "/state")[1]
        assert state["step_count"] == 4
        assert state["remaining_steps"] == CATALOG["split_1"].limits.max_steps - 4


@pytest.mark.live
def test_a_report_only_task_scores_the_report_and_a_control_waits_for_done(client, images, test_run_id):
    with Served(client, images, test_run_id) as served, FixOSEnv(base_url=served.url).sync() as env:
        first = env.reset(task_id="easy_1", seed=1, task="diagnose")
        assert "do NOT change anything" in first.observation.instruction and env.state().task == "diagnose"
        truth = truth_report(truths(served.environment(env.state().episode_id).episode.faults))
        env.step(FixOSAction(command="service nginx status", report=truth))
        done = env.step(FixOSAction(command="DONE"))
        assert done.done and done.observation.task_score == 1.0 and env.state().solved  # the report's grade

        env.reset(task_id="easy_1", seed=1, task="diagnose")  # the same report, but nginx started
        truth = truth_report(truths(served.environment(env.state().episode_id).episode.faults))
        env.step(FixOSAction(command="service nginx start", report=truth))
        done = env.step(FixOSAction(command="DONE"))
        assert done.done and done.observation.task_score == 0.0, "touching the host costs the score"
        assert env.state().diagnosis.score == 1.0

        env.reset(task_id="control_1", seed=1)  # nothing broken: a look does not end it
        looked = env.step(FixOSAction(command="service nginx status"))
        assert not looked.done and looked.observation.exit_code == 0
        done = env.step(FixOSAction(command="DONE", report={"healthy": True, "findings": []}))
        assert done.done and done.observation.task_score == 1.0 and env.state().diagnosis.score == 1.0

        with pytest.raises(Exception, match="task"):
            env.reset(task_id="easy_1", seed=1, task="fix")
