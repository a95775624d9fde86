"""Episodes reset ahead of time for announced rows (server/prepared.py): a reset of an
announced row hands over hosts that were broken and looked at before it was asked, and
they score exactly as a cold reset's: the oracle 1.0, doing nothing 0.0. Rows nobody
announced, and rows asked more often than announced, are reset cold; a server that
closes frees the episodes nobody took."""

from __future__ import annotations

import pytest
from helpers import labelled
from test_server import CATALOG, Served, oracle_command

from fixos.server import FixOSAction, FixOSEnv
from fixos.server.context import BadRequest, ServerContext


def test_a_server_without_prepare_ahead_refuses_announcements_and_bad_rows_are_named():
    context = ServerContext(client=None, catalog=CATALOG, images={})  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match="--prepare-ahead"):
        context.announce([("easy_1", 1)])
    context = ServerContext(client=None, catalog=CATALOG, images={}, prepare_ahead=1)  # type: ignore[arg-type]
    with pytest.raises(BadRequest, match="no task 'nope'"):
        context.announce([("easy_1", 1), ("nope", 1)])
    assert context.prepared is None, "a refused announcement prepares nothing"


@pytest.mark.live
def test_the_agents_session_opens_with_the_reset_and_no_step_opens_one(
    client, images, test_run_id, monkeypatch
):
    """The agent's session on the login host is opened in the first look's wait between its
    CPU readings (``first_look``): a prepared episode holds it before anyone asks, a cold
    reset before it answers, and the first step runs in it instead of paying an engine
    exec (8 sessions' first steps at once took 0.2-1.0 s, their later ones 0.15-0.3 s)."""
    from fixos.stack.hosts import LiveHost

    opened: list[str] = []
    shell = LiveHost.shell

    def counting(self, *args, **kwargs):
        opened.append(self.name)
        return shell(self, *args, **kwargs)

    with Served(client, images, test_run_id, prepare_ahead=1) as served:
        served.http("POST", "/prepare", {"rows": [{"task_id": "easy_1", "seed": 1}]})
        prepared = served.context.prepared
        assert prepared.wait_ready(1, timeout=300), f"{prepared.failures} failed"
        [ready] = [r.episode for rows in prepared._ready.values() for r in rows]
        assert list(ready.shell._open) == [ready.shell.login], "opened ahead, with the rest of the reset"
        monkeypatch.setattr(LiveHost, "shell", counting)
        with FixOSEnv(base_url=served.url).sync() as env:
            env.reset(task_id="easy_1", seed=1)
            assert env.step(FixOSAction(command="echo $((6*7))")).observation.command_output.strip() == "42"
            assert opened == [], "the prepared episode's first step opened a session"
            env.reset(task_id="easy_1", seed=2)  # not announced: reset cold
            [episode] = [s.episode for s in served.context.environments if s.episode is not None]
            assert list(episode.shell._open) == [episode.shell.login]
            before = len(opened)
            assert env.step(FixOSAction(command="echo $((6*7))")).observation.command_output.strip() == "42"
            assert len(opened) == before, "the cold reset's first step opened a session"
    assert labelled(client, test_run_id) == []


@pytest.mark.live
def test_announced_rows_are_reset_ahead_and_score_as_cold_ones(client, images, test_run_id):
    with Served(client, images, test_run_id, warm=1, prepare_ahead=3) as served:
        code, body = served.http("POST", "/prepare", {"rows": [{"task_id": "nope"}]})
        assert code == 400 and "no task 'nope'" in body["detail"]
        rows = [{"task_id": "easy_1", "seed": 1}] * 2 + [{"task_id": "easy_1", "seed": 2}]
        code, body = served.http("POST", "/prepare", {"rows": rows})
        assert code == 200 and body["waiting"] <= 3, body
        prepared = served.context.prepared
        assert prepared.wait_ready(3, timeout=300), (
            f"{prepared.ready_count()} ready, {prepared.failures} failed"
        )
        ready = {  # episode id -> its containers, broken and confirmed before anyone asked
            r.episode.episode_id: sorted(h.handle.container_id[:12] for h in r.episode.stack.hosts.values())
            for rows in prepared._ready.values()
            for r in rows
        }
        assert len(ready) == 3 and all(
            r.episode.broken_verdict for rs in prepared._ready.values() for r in rs
        )
        ready_ids = set(ready)

        with FixOSEnv(base_url=served.url).sync() as a, FixOSEnv(base_url=served.url).sync() as b:
            first = a.reset(task_id="easy_1", seed=1).observation
            state = a.state()
            assert state.episode_id in ready_ids and sorted(state.containers) == ready[state.episode_id]
            assert (
                first.task_score == 0.0 and {s.name: s.status for s in first.services}["nginx"] == "stopped"
            )
            assert first.processes and first.disks, "the first look was taken ahead too"
            fix = a.step(FixOSAction(command=oracle_command(served, state.episode_id, "easy_1")))
            assert fix.done and fix.observation.task_score == 1.0

            b.reset(task_id="easy_1", seed=1)
            assert b.state().episode_id in ready_ids - {state.episode_id}
            done = b.step(FixOSAction(command="DONE"))
            assert done.done and done.observation.task_score == 0.0

            cold = a.reset(task_id="easy_1", seed=1)  # asked a third time, announced twice
            assert a.state().episode_id not in ready_ids and cold.observation.task_score == 0.0
            assert prepared.ready_count() == 1, "the seed-2 row is still waiting for its reset"
    assert labelled(client, test_run_id) == [], "closing the server frees the episode nobody took"


def test_a_removal_already_under_way_is_waited_for_not_raised():
    """Closing a server while its pool or a prepared episode is removed in the background:
    the engine answers 409 "removal ... is already in progress" (seen with 64 sessions)."""
    import docker.errors
    import requests

    from fixos.stack.leftovers import remove_labelled

    class Container:
        id = "c" * 64

        def remove(self, **kwargs):
            response = requests.Response()
            response.status_code, response.reason, response.url = 409, "Conflict", "http+docker://x"
            raise docker.errors.APIError(
                "409", response=response, explanation=f"removal of container {self.id} is already in progress"
            )

    class Containers:
        gets = 0

        def list(self, **kwargs):
            return [Container()]

        def get(self, container_id):
            self.gets += 1
            if self.gets < 3:
                return Container()
            raise docker.errors.NotFound("gone")

    class Empty:
        def list(self, **kwargs):
            return []

    client = type("Client", (), {"containers": Containers(), "networks": Empty(), "volumes": Empty()})()
    assert remove_labelled(client, run_id="r") == 1 and client.containers.gets == 3
