"""The OpenEnv Environment on live FixOS hosts: one ``fixos.episodes.Episode`` per reset.

No container exists before ``reset()``; ``close()`` (and a new ``reset()``) removes the
episode's containers. Everything the sessions share lives in one ``ServerContext``.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import docker
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from fixos.core.errors import BudgetExhausted, FixOSError, ShellError, StackError
from fixos.core.models import Verdict
from fixos.episodes import Episode, new_run_id
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.schema import Scenario
from fixos.server.hostview import HostView, parse, probe_script
from fixos.server.models import DONE_COMMAND, FixOSAction, FixOSObservation, FixOSState
from fixos.server.rewards import step_reward
from fixos.shells.base import Shell
from fixos.shells.recording import RecordingShell
from fixos.stack.engine import connect
from fixos.stack.hosts import remove_labelled
from fixos.stack.images import ensure_image
from fixos.stack.pool import HostPool, shape_of

PROBE_TIMEOUT = 10.0
HISTORY = 20


class SessionExpired(FixOSError):
    """The session was closed (idle timeout, shutdown): the client must open another."""


class BadRequest(FixOSError):
    """The client asked for something that does not exist (a task, a step before reset)."""


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
    ) -> None:
        self.run_id = run_id or new_run_id()
        self.warm = warm
        """booted spares to keep once the first session resets (0: every reset boots)."""
        self._pool: HostPool | None = None
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
        return self.catalog[task_id]

    def open_episode(self, scenario: Scenario, seed: int, episode_id: str) -> Episode:
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
        )

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
        for env in self.environments:
            env.close()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        if self._client is not None:
            remove_labelled(self._client, run_id=self.run_id)


class FixOSEnvironment(Environment[FixOSAction, FixOSObservation, FixOSState]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, context: ServerContext) -> None:
        super().__init__()
        self._ctx = context
        self._episode: Episode | None = None
        self._scenario: Scenario | None = None
        self._shell: RecordingShell | None = None
        self._probe: Shell | None = None
        self._view = HostView()
        self._progress = 0.0
        self._history: list[str] = []
        self._state = FixOSState()
        self._closed = False
        self._lock = threading.RLock()
        context.register(self)

    # -- OpenEnv API -------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        **kwargs: Any,
    ) -> FixOSObservation:
        with self._lock:
            if self._closed:
                raise SessionExpired("this session was closed (idle timeout or shutdown); open a new one")
            self._release()
            scenario = self._ctx.scenario(task_id)
            seed = 1 if seed is None else seed
            episode_id = episode_id or f"{scenario.id}-s{seed}-{secrets.token_hex(3)}"
            episode = self._ctx.open_episode(scenario, seed, episode_id)
            self._episode, self._scenario = episode, scenario
            try:
                episode.reset()
                limits = scenario.limits
                self._shell = RecordingShell(
                    episode.shell,
                    max_steps=limits.max_steps,
                    wall_seconds=limits.wall_seconds,
                    command_timeout=limits.command_timeout,
                )
                self._probe = episode.host.shell(default_timeout=PROBE_TIMEOUT)
                self._view = self._look(first=True)
                verdict = self._judge()
            except BaseException:
                self._release()
                raise
            self._progress = progress(verdict)
            self._history = []
            self._state = FixOSState(
                episode_id=episode_id,
                step_count=0,
                task_id=scenario.id,
                difficulty=scenario.difficulty,
                seed=seed,
                max_steps=limits.max_steps,
                remaining_steps=limits.max_steps,
                task_score=verdict.reward,
                containers=[h.handle.container_id[:12] for h in episode.stack.hosts.values()],
            )
            return self._observe("", None, reward=0.0, score=verdict.reward)

    def step(self, action: FixOSAction, timeout_s: float | None = None, **kwargs: Any) -> FixOSObservation:
        with self._lock:
            if self._closed:
                raise SessionExpired("this session was closed (idle timeout or shutdown); open a new one")
            if self._state.done:
                return self._observe("the episode is over; reset() starts another", None, reward=0.0)
            if self._episode is None or self._shell is None:
                raise BadRequest("no episode yet: call reset() first")
            command = action.command_line()
            if command.strip() == DONE_COMMAND:
                return self._finish("", None, reward=0.0)
            try:
                result = self._shell.run(command, timeout=timeout_s)
            except (BudgetExhausted, ShellError) as exc:  # out of budget, or the agent killed its shell
                return self._finish(f"[fixos: {exc}]", None, reward=0.0)
            before, self._view = self._view, self._look(first=False)
            verdict = self._judge()
            if verdict.solved:  # looks repaired: judge it as the end would (hold periods too)
                verdict = self._episode.verify()
            now = progress(verdict)
            shaped = step_reward(
                command,
                result.output,
                before,
                self._view,
                self._progress,
                now,
                solved=verdict.solved,
                repeated=command in self._history,
            )
            self._progress = now
            self._history.append(command)
            self._state.step_count += 1
            self._state.remaining_steps = self._shell.remaining_steps
            self._state.task_score = verdict.reward
            out_of_time = time.monotonic() >= self._shell.deadline
            if verdict.solved or self._shell.remaining_steps <= 0 or out_of_time:
                obs = self._finish(
                    result.output,
                    result.exit_code,
                    reward=shaped.value,
                    timed_out=result.timed_out,
                    verdict=verdict if verdict.solved else None,
                )
            else:
                obs = self._observe(
                    result.output, result.exit_code, reward=shaped.value, timed_out=result.timed_out
                )
            obs.metadata["reward_parts"] = shaped.parts
            return obs

    @property
    def state(self) -> FixOSState:
        return self._state

    @property
    def episode(self) -> Episode | None:
        """The live episode, for in-process callers (tests, a pool); never sent over the wire."""
        return self._episode

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="fixos",
            description="Repair real, broken nginx + MariaDB servers over a root shell (live containers).",
            version="0.1.0",
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._release()

    # -- helpers -----------------------------------------------------------

    def _finish(
        self,
        output: str,
        exit_code: int | None,
        *,
        reward: float,
        timed_out: bool = False,
        verdict: Verdict | None = None,
    ) -> FixOSObservation:
        """Score with the verifier (waiting out hold periods) unless just done, then free the containers."""
        assert self._episode is not None
        verdict = verdict or self._episode.verify()
        self._state.done = True
        self._state.solved = verdict.solved
        self._state.final_score = verdict.reward
        self._state.task_score = verdict.reward
        obs = self._observe(output, exit_code, reward=reward, timed_out=timed_out)
        obs.metadata["verdict"] = verdict.reward_json()
        self._release()
        return obs

    def _observe(
        self,
        output: str,
        exit_code: int | None,
        *,
        reward: float,
        timed_out: bool = False,
        score: float | None = None,
    ) -> FixOSObservation:
        scenario, view, state = self._scenario, self._view, self._state
        assert scenario is not None
        return FixOSObservation(
            command_output=output,
            exit_code=exit_code,
            timed_out=timed_out,
            processes=view.processes,
            services=view.services,
            disks=view.disks,
            resources=view.resources(),
            history=self._history[-HISTORY:],
            task_id=scenario.id,
            task_difficulty=scenario.difficulty,
            instruction=scenario.instruction,
            task_score=state.task_score if score is None else score,
            is_success_step=state.done and state.solved,
            remaining_steps=state.remaining_steps,
            reward=reward,
            done=state.done,
            metadata={"episode_id": state.episode_id, "step": state.step_count}
            | ({"error": view.error} if view.error else {}),
        )

    def _look(self, *, first: bool) -> HostView:
        assert self._probe is not None and self._scenario is not None
        services = self._scenario.hosts[0].services
        try:
            result = self._probe.run(probe_script(services, first=first), timeout=PROBE_TIMEOUT)
        except (ShellError, StackError) as exc:  # a host the agent broke badly is still judged
            return HostView(error=f"the host probe failed: {exc}")
        return parse(result.output, None if first else self._view)

    def _judge(self) -> Verdict:
        # Per-step progress: the verifier's checks without waiting out hold periods.
        assert self._episode is not None
        return self._episode.progress()

    def _release(self) -> None:
        if self._probe is not None:
            with contextlib.suppress(Exception):  # the container may be gone already; the stack still goes
                self._probe.close()
        self._shell = self._probe = None  # the agent's shell is the episode's: it closes it
        if self._episode is not None:
            episode, self._episode = self._episode, None
            episode.close()
            self._state.containers = []


def progress(verdict: Verdict) -> float:
    """Weighted share of scored checks passing, gates aside: what shaping rewards moving."""
    scored = [c for c in verdict.checks if c.scored]
    total = sum(c.weight for c in scored)
    return round(sum(c.weight for c in scored if c.passed) / total, 4) if total else 0.0
