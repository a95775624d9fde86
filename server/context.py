"""What every session of one FixOS OpenEnv server shares (``ServerContext``), and the errors
a session raises that the app turns into HTTP statuses / WebSocket error frames."""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import docker

from ..core.errors import FixOSError, ScenarioError
from ..episodes.episode import Episode, new_run_id
from ..scenarios.catalog import load_catalog
from ..scenarios.schema import Scenario
from ..stack.engine import connect
from ..stack.images import ensure_image
from ..stack.leftovers import remove_labelled
from ..stack.pool import HostPool, shape_of
from .prepared import Prepared, Ready

if TYPE_CHECKING:
    from .environment import FixOSEnvironment

DEFAULT_STEP_SECONDS = 40.0
"""a command's limit in a step unless the server is told otherwise: OpenEnv's generic client
gives up on an answer after 60 s (``message_timeout_s``) and then drops the session, and
16 of 17 scenarios allow a 60 s command; 40 s leaves ~20 s for the probes and the judge."""


def step_seconds_setting() -> float:
    """FIXOS_STEP_SECONDS, or the default; 0 means each scenario's own command timeout."""
    return float(os.environ.get("FIXOS_STEP_SECONDS", DEFAULT_STEP_SECONDS))


class SessionExpired(FixOSError):
    """The session was closed (idle timeout, shutdown): the client must open another."""


class BadRequest(FixOSError):
    """The client asked for something that does not exist (a task, a host, a step before reset)."""


class NoEpisode(BadRequest):
    """A step in a session that never held an episode: on a WebSocket, almost always a client
    that reconnected after dropping its socket (its message timeout ran out mid-step), which
    ended the session the episode lived in. Said plainly, so a trainer does not step on."""

    MESSAGE = (
        "SESSION_LOST: this session holds no episode. A new WebSocket is a new session: if this "
        "client was mid-episode, its previous connection dropped (e.g. its message_timeout_s ran "
        "out during a step) and the server ended that episode with it. Call reset() to start "
        "another; raise message_timeout_s above the server's step limit (README: OpenEnv timeouts)."
    )

    def __init__(self) -> None:
        super().__init__(self.MESSAGE)


class ServerContext:
    """What every session of one server shares: the engine, the images, the catalogue,
    the run id that labels all its containers, and the open environments."""

    def __init__(
        self,
        *,
        run_id: str | None = None,
        client: docker.DockerClient | None = None,
        catalog: dict[str, Scenario] | None = None,
        images: dict[str, str] | None = None,
        log: Callable[[str], None] = lambda line: None,
        warm: int = 0,
        step_seconds: float | None = None,
        prepare_ahead: int = 0,
    ) -> None:
        self.run_id = run_id or new_run_id()
        self.step_seconds = step_seconds_setting() if step_seconds is None else step_seconds
        """the cap on one command's time in a step (0: the scenario's command timeout alone)."""
        self.warm = warm
        """booted spares to keep once the first session resets (0: every reset boots)."""
        self._pool: HostPool | None = None
        self.prepare_ahead = prepare_ahead
        """episodes broken ahead of time for announced rows, at most (0: no announcements)."""
        self._prepared: Prepared | None = None
        self.catalog = catalog if catalog is not None else load_catalog()
        self._client = client
        self._images: dict[str, str] = dict(images or {})
        self._log = log
        self._lock = threading.Lock()
        self._image_lock = threading.Lock()
        self._next_task = 0
        self._environments: weakref.WeakSet[FixOSEnvironment] = weakref.WeakSet()

    @property
    def environments(self) -> list[FixOSEnvironment]:
        """Every environment not yet garbage: sessions' and throwaway ones (``/metadata``)."""
        with self._lock:
            return list(self._environments)

    def register(self, env: FixOSEnvironment) -> None:
        with self._lock:
            self._environments.add(env)

    @property
    def client(self) -> docker.DockerClient:
        with self._lock:
            if self._client is None:
                self._client = connect()
            return self._client

    def images_for(self, scenario: Scenario) -> dict[str, str]:
        client = self.client
        with self._image_lock:  # a first build can take minutes: hold only other resets
            # the inspector: the verifier's vantage point on every host
            for name in sorted(({h.image for h in scenario.hosts} | {"inspector"}) - set(self._images)):
                self._images[name] = ensure_image(client, name, self._log)
            return dict(self._images)

    def scenario(self, task_id: str | None) -> Scenario:
        """The named task, or the next one in catalogue order (as the simulated FixOS cycled)."""
        if task_id is None:
            with self._lock:
                ids = list(self.catalog)
                task_id = ids[self._next_task % len(ids)]
                self._next_task += 1
        if task_id not in self.catalog:
            raise BadRequest(f"no task {task_id!r}; GET /tasks lists them ({', '.join(self.catalog)})")
        try:
            return self.catalog[task_id]
        except ScenarioError as exc:  # a generated id of no level
            raise BadRequest(str(exc)) from None

    def open_episode(self, scenario: Scenario, seed: int, episode_id: str, task: str = "repair") -> Episode:
        """The one place an Episode is made: its hosts come from the warm pool when there is one."""
        images = self.images_for(scenario)
        return Episode(
            scenario,
            seed,
            client=self.client,
            images=images,
            run_id=self.run_id,
            episode_id=episode_id,
            pool=self._warm_pool(images),
            task=task,
        )

    def announce(self, rows: list[tuple[str, int]]) -> int:
        """Queue rows (task id, seed) to be reset ahead of time, in the order they will be
        asked for (``prepared.py``); returns how many rows wait to be prepared."""
        if self.prepare_ahead < 1:
            raise BadRequest("this server prepares no episodes ahead: start it with --prepare-ahead N")
        scenarios = [(self.scenario(task_id), seed) for task_id, seed in rows]
        with self._lock:
            if self._prepared is None:
                # imported here: the environment module imports this one
                from .environment import first_look

                self._prepared = Prepared(
                    self.open_episode, first_look, ahead=self.prepare_ahead, log=self._log
                )
            prepared = self._prepared
        try:
            return prepared.announce(scenarios)
        except ValueError as exc:
            raise BadRequest(str(exc)) from None

    def take_prepared(self, scenario: Scenario, seed: int) -> Ready | None:
        """An episode of this row reset ahead of time, if one is ready."""
        with self._lock:
            prepared = self._prepared
        return prepared.take(scenario.id, seed) if prepared is not None else None

    @property
    def prepared(self) -> Prepared | None:
        """The announced rows and ready episodes (None until the first announcement)."""
        with self._lock:
            return self._prepared

    def _warm_pool(self, images: dict[str, str]) -> HostPool | None:
        # Started by the first reset, not with the server: no container exists
        # before a client asks for one, and the pool needs the images built.
        if not self.warm:
            return None
        with self._lock:
            if self._pool is None:
                shapes = {shape_of(s.hosts): s.hosts for s in self.catalog.values()}
                self._pool = HostPool(
                    self._client or connect(),
                    images,
                    run_id=self.run_id,
                    size=self.warm,
                    shapes=list(shapes.values()),
                    on_error=self._log,
                )
            return self._pool

    def close_all(self) -> None:
        """Close every open environment, then remove anything left with this server's label."""
        with self._lock:
            prepared, self._prepared = self._prepared, None
        if prepared is not None:
            prepared.close()
        for env in self.environments:
            env.close()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        if self._client is not None:
            remove_labelled(self._client, run_id=self.run_id)
