"""The OpenEnv Environment on live FixOS hosts: one ``fixos.episodes.episode.Episode`` per reset.

No container exists before ``reset()``; ``close()`` (and a new ``reset()``) removes the
episode's containers. Everything the sessions share lives in one ``ServerContext``.

Time: the scenario's ``wall_seconds`` is spent by commands only (time on the hosts), never
by the client's think time between steps, which only the server's idle timeout bounds
(``app.py``); one command gets at most the scenario's ``command_timeout`` and the server's
``step_seconds``, whichever is less, so a step answers inside the client's message timeout.

Reports: an action may carry one (``FixOSAction.report``), alone or with a command. The
session keeps the last that parsed (``fixos.diagnosis.Handed``) and grades it only when the
episode ends, beside the verifier's score (``FixOSState.diagnosis``): a grade after each
report would let a client search the ground truth. A report alone runs nothing, spends no
step of the budget and earns no step reward (the table's ``diagnose`` row pays for reading
evidence on the host, not for saying what it means).
"""

from __future__ import annotations

import contextlib
import math
import threading
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from ..core.errors import BudgetExhausted, FixOSError, ShellError
from ..core.models import CommandResult, Verdict
from ..diagnosis.report import Handed, ReportError
from ..episodes import tasks
from ..episodes.diagnosed import graded
from ..episodes.episode import Episode
from ..scenarios.schema import Scenario
from ..shells.recording import RecordingShell
from ..training.curriculum import Choice, Curriculum
from .context import BadRequest, NoEpisode, ServerContext, SessionExpired
from .hostview import HostView
from .models import DONE_COMMAND, FixOSAction, FixOSObservation, FixOSState
from .monitor import Monitor
from .prepared import Ready, prepared_episode_id
from .rewards import step_reward

__all__ = ["BadRequest", "FixOSEnvironment", "NoEpisode", "ServerContext", "SessionExpired", "progress"]

HISTORY = 20


class FixOSEnvironment(Environment[FixOSAction, FixOSObservation, FixOSState]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, context: ServerContext) -> None:
        super().__init__()
        self._ctx = context
        self._episode: Episode | None = None
        self._scenario: Scenario | None = None
        self._shell: RecordingShell | None = None
        self._monitor: Monitor | None = None
        self._hosts = HostShells()
        self._view = HostView()
        self._progress = 0.0
        self._history: list[str] = []
        self._reports = Handed()
        self._state = FixOSState()
        self._host_seconds = 0.0
        """time the episode's commands took: what the scenario's wall_seconds bounds."""
        self._curriculum = Curriculum()
        """this session's: the level of its next ``reset(level="auto")`` follows its results"""
        self._choice: Choice | None = None
        self._closed = False
        self._lock = threading.RLock()
        context.register(self)

    # -- OpenEnv API -------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_id: str | None = None,
        level: int | str | None = None,
        task: str | None = None,
        **kwargs: Any,
    ) -> FixOSObservation:
        with self._lock:
            if self._closed:
                raise SessionExpired("this session was closed (idle timeout or shutdown); open a new one")
            try:
                level_of_task = tasks.task_level(task or tasks.REPAIR)
            except FixOSError as exc:
                raise BadRequest(f"task: {exc}") from None
            self._release()
            self._choice = None if task_id is not None or level is None else self._choose(level)
            scenario = self._ctx.scenario(self._choice.task_id if self._choice else task_id)
            seed = 1 if seed is None else seed
            # an episode broken ahead of time for this row (``prepared.py``), unless the
            # caller names the episode: its id labels containers booted before the ask
            repair = level_of_task == tasks.REPAIR  # episodes reset ahead of time are repairs
            ready = self._ctx.take_prepared(scenario, seed) if episode_id is None and repair else None
            if ready is not None:
                episode = ready.episode
                episode_id = episode.episode_id
            else:
                episode_id = episode_id or prepared_episode_id(scenario, seed)
                episode = self._ctx.open_episode(scenario, seed, episode_id, level_of_task)
            self._episode, self._scenario = episode, scenario
            # the pool's refills wait until the first observation too (``HostPool.resetting``)
            quiet = episode.pool.resetting() if episode.pool is not None else contextlib.nullcontext()
            try:
                with quiet:
                    self._start(episode, scenario, ready)
                verdict = episode.broken_verdict or self._judge()
            except BaseException:
                self._release()
                raise
            limits = scenario.limits
            self._progress = progress(verdict)
            self._history = []
            self._reports = Handed()
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
                level=self._choice.level if self._choice else None,
                curriculum=self._choice.why if self._choice else None,
                task=level_of_task,
            )
            return self._observe("", None, reward=0.0)

    def step(self, action: FixOSAction, timeout_s: float | None = None, **kwargs: Any) -> FixOSObservation:
        with self._lock:
            if self._closed:
                raise SessionExpired("this session was closed (idle timeout or shutdown); open a new one")
            if self._state.done:
                return self._observe("the episode is over; reset() starts another", None, reward=0.0)
            if self._episode is None or self._shell is None:
                raise NoEpisode()
            said, refused = self._take_report(action)
            command = action.command_line()
            if command is None:  # a report alone: nothing runs, nothing is spent
                return self._observe(refused or said, None, reward=0.0, report_error=refused)
            if command.strip() == DONE_COMMAND:
                ended = self._finish()
                return self._observe(refused or said, None, reward=0.0, final=ended, report_error=refused)
            self._hosts.use(action.host)
            try:
                result = self._shell.run(command, timeout=self._command_limit(timeout_s))
            except (BudgetExhausted, ShellError) as exc:  # out of budget, or the agent killed its shell
                ended = self._finish()
                return self._observe(f"[fixos: {exc}]", None, reward=0.0, final=ended, report_error=refused)
            self._host_seconds += result.duration
            before, self._view = self._view, self._look(first=False)
            verdict = self._judge()
            # looks repaired: judge it as the end would (hold periods too); never where the host
            # must be left as found (a control passes from the start: only DONE or the budget ends it)
            if verdict.solved and not self._episode.as_found:
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
            final = None
            ended = verdict.solved and not self._episode.as_found
            if ended or self._shell.remaining_steps <= 0 or self._time_left() <= 0:
                final = self._finish(verdict if ended else None)
            obs = self._observe(
                result.output,
                result.exit_code,
                reward=shaped.value,
                timed_out=result.timed_out,
                final=final,
                report_error=refused,
            )
            obs.metadata["reward_parts"] = shaped.parts
            return obs

    def _start(self, episode: Episode, scenario: Scenario, ready: Ready | None) -> None:
        """Reset the episode's hosts and take the first look (both done already when it was
        prepared); the step-0 score is the confirmation's verdict (``Episode.broken_verdict``):
        the same checks on the same hosts and baseline, just judged, so judging again would
        cost a second inspector and every gate for the same answer (tests/test_shared_baselines.py)."""
        if ready is None:
            episode.reset()
            self._monitor, self._view = first_look(episode)
        else:
            self._monitor, self._view = ready.monitor, ready.view
        limits = scenario.limits
        self._hosts = HostShells(episode)
        self._shell = RecordingShell(
            self._hosts,
            max_steps=limits.max_steps,
            wall_seconds=math.inf,  # spent by commands only: self._host_seconds
            command_timeout=limits.command_timeout,
        )
        self._host_seconds = 0.0

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

    def _time_left(self) -> float:
        assert self._scenario is not None
        return self._scenario.limits.wall_seconds - self._host_seconds

    def _command_limit(self, asked: float | None) -> float:
        """The scenario's command timeout, capped by the server's step limit and what is left
        of the episode's command time (and by the plain endpoint's ``timeout_s``, if asked)."""
        assert self._scenario is not None
        limits = [self._scenario.limits.command_timeout, self._time_left()]
        if self._ctx.step_seconds > 0:
            limits.append(self._ctx.step_seconds)
        if asked:
            limits.append(asked)
        return max(min(limits), 0.1)

    def _take_report(self, action: FixOSAction) -> tuple[str, str | None]:
        """The action's report kept: (what the agent is told, the error line if it did not parse)."""
        if action.report is None:
            return "", None
        try:
            return f"[fixos: {self._reports.take(action.report)}]", None
        except ReportError as exc:
            return "", str(exc)

    def _finish(self, verdict: Verdict | None = None) -> Verdict:
        """End the episode: score it with the verifier (waiting out hold periods) unless just
        done, grade the kept report, then free the containers. The final verdict, for the
        last observation."""
        assert self._episode is not None
        verdict = verdict or self._episode.verify()
        task = self._episode.task
        self._state.diagnosis = graded(self._reports.text, "agent", self._episode.faults, task)
        score = verdict.reward
        if task in tasks.REPORT_ONLY:  # the report's grade, 0.0 if the host was touched
            score = tasks.report_reward(verdict, self._state.diagnosis.score)
        self._state.done = True
        self._state.solved = score == 1.0
        self._state.final_score = score
        self._state.task_score = score
        if self._choice is not None:
            self._curriculum.record(self._choice, verdict.reward)
        self._release()
        return verdict

    def _choose(self, level: int | str) -> Choice:
        """A train world: the curriculum's (``"auto"``) or the next one of a fixed level."""
        try:
            return self._curriculum.next(level)
        except ValueError as exc:
            raise BadRequest(f"level: {exc}") from None

    def _observe(
        self,
        output: str,
        exit_code: int | None,
        *,
        reward: float,
        timed_out: bool = False,
        final: Verdict | None = None,
        report_error: str | None = None,
    ) -> FixOSObservation:
        """What the agent is shown after a step (or a reset); ``final``: the verdict that
        ended the episode (``_finish``), given in the metadata of the last observation."""
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
            instruction=tasks.instruction_for(state.task, scenario.instruction),
            task_score=state.task_score,
            is_success_step=state.done and state.solved,
            remaining_steps=state.remaining_steps,
            report_error=report_error,
            diagnosis=state.diagnosis if state.done else None,
            reward=reward,
            done=state.done,
            metadata={"episode_id": state.episode_id, "step": state.step_count}
            | ({"error": view.error} if view.error else {})
            | ({"verdict": final.reward_json()} if final is not None else {}),
        )

    def _look(self, *, first: bool) -> HostView:
        assert self._monitor is not None
        return self._monitor.look(None if first else self._view)

    def _judge(self) -> Verdict:
        # Per-step progress: the verifier's checks without waiting out hold periods.
        assert self._episode is not None
        return self._episode.progress()

    def _release(self) -> None:
        if self._monitor is not None:
            with contextlib.suppress(Exception):  # the container may be gone already; the stack still goes
                self._monitor.close()
        self._shell, self._monitor = None, None  # the agent's shells are the episode's: it closes them
        if self._episode is not None:
            episode, self._episode = self._episode, None
            episode.close()
            self._state.containers = []


class HostShells:
    """The agent's shells on the episode's hosts (``Episode.shell(host)``) behind one ``Shell``,
    so that one RecordingShell keeps one step budget and one transcript across hosts.
    ``use(name)`` picks the next command's host (None: the login host)."""

    def __init__(self, episode: Episode | None = None) -> None:
        self._episode = episode
        self._current: str | None = None

    def use(self, host: str | None) -> None:
        assert self._episode is not None
        names = list(self._episode.stack.hosts)
        if host is not None and host not in names:
            raise BadRequest(f"no host {host!r} in this episode; its hosts: {', '.join(names)}")
        self._current = host

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        assert self._episode is not None
        return self._episode.shell(self._current).run(command, timeout=timeout)

    def close(self) -> None:
        pass  # the episode closes its shells


def first_look(episode: Episode) -> tuple[Monitor, HostView]:
    """The monitor of a reset episode's login host (``fixos.server.monitor``), and its first look.
    The agent's session on that host is opened in the look's wait between its CPU readings, so
    the first step pays no engine exec (8 sessions' first steps at once took 0.2-1.0 s, the
    others 0.15-0.3 s); a prepared episode opens it ahead with the rest of its reset."""
    login = episode.scenario.login_host
    services = next(h.services for h in episode.scenario.hosts if h.name == login)
    monitor = Monitor(episode.host, services)
    try:
        return monitor, monitor.look(None, meanwhile=episode.shell)
    except BaseException:
        monitor.close()
        raise


def progress(verdict: Verdict) -> float:
    """Weighted share of scored checks passing, gates aside: what shaping rewards moving."""
    scored = [c for c in verdict.checks if c.scored]
    total = sum(c.weight for c in scored)
    return round(sum(c.weight for c in scored if c.passed) / total, 4) if total else 0.0
