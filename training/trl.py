"""FixOS for TRL's ``GRPOTrainer(environment_factory=...)``: one live episode per rollout.

    from trl import GRPOTrainer
    from fixos.training.trl import FixOSToolEnv

    # each dataset row: {"prompt": [{"role": "user", "content": "..."}], "task_id": "easy_1", "seed": 3}
    trainer = GRPOTrainer(model=..., train_dataset=rows, environment_factory=FixOSToolEnv)

TRL's contract, which this class keeps: a no-argument constructor; ``reset(**row)``
returning text that TRL appends to the row's last user message; every other public
method is a tool the model may call (so the only ones here are ``run`` and ``report``, and
freeing the hosts is ``close(env)`` at module level, ``with env:`` or garbage collection);
``get_reward()`` is the environment-owned reward TRL adds to the reward functions. The
report is graded when the episode is judged, beside the reward (``verdict["diagnosis"]``),
never added to it.

Configuration (environment variables, read by the constructor, or class attributes of a
subclass): FIXOS_SCENARIO_DIR, FIXOS_DOCKER_HOST, FIXOS_TRANSPORT (exec | ssh),
FIXOS_TASK (a task id, or several joined by commas, drawn from at random when a row has no
``task_id``; default: the whole catalogue, so TRL can run without a dataset) and
FIXOS_SEED (when a row has no ``seed``; default: a random seed), FIXOS_LEVEL (when a row
has neither ``task_id`` nor ``level``: a generated world's level 1-5, or ``auto`` for the
curriculum that follows the model's results),
FIXOS_OUTPUT_CHARS (the tail of a command's output the model sees).
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
import weakref
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..core.errors import ShellError
from ..diagnosis.report import Handed, ReportError
from ..episodes import tasks
from ..episodes.api import episode
from ..episodes.diagnosed import graded
from ..episodes.episode import Episode
from ..scenarios.catalog import load_catalog
from ..scenarios.schema import SCENARIO_DIR
from .curriculum import Choice, Curriculum

__all__ = ["FixOSToolEnv", "close", "reward_func"]


def _setting(name: str, default: str | None) -> str | None:
    return os.environ.get(name) or default


class FixOSToolEnv:
    """A broken live server to repair through a tool, ``run``, and to report on through another,
    ``report``; scored by FixOS's verifier."""

    scenario_dir: Path | None = None
    docker_host: str | None = None
    transport: str | None = None
    default_task: str | None = None
    default_seed: int | None = None
    default_level: str | None = None
    output_chars: int | None = None

    def __init__(self) -> None:
        cls = type(self)
        self._scenario_dir = Path(cls.scenario_dir or _setting("FIXOS_SCENARIO_DIR", str(SCENARIO_DIR)))
        self._docker_host = cls.docker_host or _setting("FIXOS_DOCKER_HOST", None)
        self._transport = cls.transport or _setting("FIXOS_TRANSPORT", "exec")
        self._default_task = cls.default_task or _setting("FIXOS_TASK", None)
        seed = _setting("FIXOS_SEED", None)
        self._default_seed = cls.default_seed if cls.default_seed is not None else seed and int(seed)
        self._output_chars = cls.output_chars or int(_setting("FIXOS_OUTPUT_CHARS", "8000"))
        self._default_level = cls.default_level or _setting("FIXOS_LEVEL", None)
        self._curriculum = Curriculum()
        self._choice: Choice | None = None
        """the generated world ``reset`` drew and why (None: a task id was given)"""
        self._hosts = contextlib.ExitStack()
        """holds the live episode's context (api.episode): closing it removes the hosts."""
        self._episode: Episode | None = None
        self._steps = 0
        self._deadline = 0.0
        self._score: float | None = None
        self._verdict: dict[str, Any] | None = None
        self._reports = Handed()
        self._lock = threading.RLock()
        # Hosts are freed when the trainer drops the instance or the interpreter exits;
        # the callback holds the ExitStack, never self, so it does not keep self alive.
        self._finalizer = weakref.finalize(self, self._hosts.close)

    # -- TRL's contract ------------------------------------------------------------------

    def reset(
        self,
        task_id: str | None = None,
        seed: int | None = None,
        level: int | str | None = None,
        task: str | None = None,
        **row: Any,
    ) -> str:
        """Free the previous episode's hosts, start ``task_id`` at ``seed``, return the instruction.
        Without a task id, ``level`` (or FIXOS_LEVEL) draws a generated train world: a level
        1-5, or ``auto``, this environment's curriculum (``fixos.training.curriculum``).
        ``task``: a row's task level (repair by default; diagnose, localise, detect: the reward
        is the report's grade, 0.0 if the host was touched)."""
        with self._lock:
            self._release()
            if seed is None:
                seed = self._default_seed or random.randint(1, 1_000_000)
            level = level if level is not None else self._default_level
            self._choice = self._curriculum.next(level) if task_id is None and level is not None else None
            live = self._hosts.enter_context(
                episode(
                    self._choice.task_id if self._choice else task_id or self._draw_task(),
                    int(seed),
                    transport=self._transport,
                    docker_host=self._docker_host,
                    scenario_dir=self._scenario_dir,
                    task=task or tasks.REPAIR,
                )
            )
            self._episode = live
            self._steps, self._score, self._verdict = 0, None, None
            self._reports = Handed()
            self._deadline = time.monotonic() + live.scenario.limits.wall_seconds
            return tasks.instruction_for(live.task, live.scenario.instruction)

    def run(self, command: str) -> str:
        """Run a bash command as root on the broken server and return its output and exit code.

        Args:
            command: The bash command line to run, e.g. "service nginx status" or "ls -l /etc/nginx".

        Returns:
            The command's output (stdout and stderr), then a line with its exit code.
        """
        with self._lock:
            live = self._episode
            if live is None:
                return "[fixos: the episode is over; no command runs]"
            limits = live.scenario.limits
            left = self._deadline - time.monotonic()
            if self._steps >= limits.max_steps or left <= 0:
                return "[fixos: the episode's step or time budget is spent; no command runs]"
            self._steps += 1
            try:
                result = live.shell.run(command, timeout=min(limits.command_timeout, max(left, 0.1)))
            except ShellError as exc:  # the agent killed its own shell: that is its episode
                return f"[fixos: the shell is gone: {exc}]"
            output = result.output
            if len(output) > self._output_chars:
                output = (
                    f"[... {len(output) - self._output_chars} characters cut]\n"
                    + output[-self._output_chars :]
                )
            note = " (killed at the command timeout)" if result.timed_out else ""
            return f"{output.rstrip()}\n[exit code: {result.exit_code}{note}]"

    def report(self, report: str) -> str:
        """Hand over your diagnosis of what is broken on the server; it is graded when the episode ends.

        Args:
            report: A JSON object, {"healthy": false, "findings": [{"host": "web", "component":
                "service:nginx", "cause": "config_error", "evidence": "nginx -t: unknown directive"}]},
                or {"healthy": true, "findings": []} if nothing is wrong. A component is KIND:TARGET,
                e.g. service:nginx, file:/etc/nginx/nginx.conf, fs:/var/log, process:PID, port:80;
                the cause is one of config_error, service_stopped, resource_exhaustion, port_conflict,
                permission, dependency, network_policy, certificate, scheduled_rebreaker,
                data_corruption. A later report replaces an earlier one.

        Returns:
            A line saying the report was kept, or why it was not, naming the field that is wrong.
        """
        with self._lock:
            if self._episode is None:
                return "[fixos: the episode is over; no report is taken]"
            try:
                return f"[fixos: {self._reports.take(report)}]"
            except ReportError as exc:
                return f"[fixos: {exc}]"

    def get_reward(self) -> float:
        """The verifier's final score of the episode (0.0 to 1.0); frees its hosts once judged."""
        with self._lock:
            if self._score is None:
                if self._episode is None:
                    return 0.0
                verdict = self._episode.verify()
                task = self._episode.task
                diagnosis = graded(self._reports.text, "agent", self._episode.faults, task)
                score = verdict.reward
                if task in tasks.REPORT_ONLY:  # the report's grade, 0.0 if the host was touched
                    score = tasks.report_reward(verdict, diagnosis.score)
                self._score, self._verdict = score, verdict.reward_json()
                self._verdict["diagnosis"] = diagnosis.model_dump()
                self._verdict["task"] = task
                self._verdict["reward"] = score
                if self._choice is not None:  # the curriculum's record, beside the checks
                    self._curriculum.record(self._choice, score)
                    self._verdict["curriculum"] = asdict(self._choice)
                self._release()
            return self._score

    # -- for callers, not tools (properties and dunders are not methods TRL exposes) ------

    @property
    def reward(self) -> float:
        """``get_reward()``: judged on first use, then the same number."""
        return self.get_reward()

    @property
    def verdict(self) -> dict[str, Any] | None:
        """The judged episode's reward.json (each check, passed or not) and ``diagnosis`` (the
        report's grade: ``score``, ``recall``, ``precision``, ``per_fault``, ``source``, ``error``),
        once judged."""
        return self._verdict

    @property
    def live_episode(self) -> Episode | None:
        """The episode while it holds hosts (tests read its faults to render the oracle)."""
        return self._episode

    @property
    def steps(self) -> int:
        return self._steps

    def __enter__(self) -> FixOSToolEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        close(self)

    def _draw_task(self) -> str:
        if self._default_task:
            return random.choice(self._default_task.split(","))
        return random.choice(list(load_catalog(self._scenario_dir)))

    def _release(self) -> None:
        self._episode = None
        self._hosts.close()


def close(env: FixOSToolEnv) -> None:
    """Free the hosts ``env`` holds now (not a method: TRL would offer it to the model as a tool)."""
    with env._lock:
        env._release()


def reward_func(environments: list[FixOSToolEnv], **kwargs: Any) -> list[float]:
    """TRL's ``reward_funcs`` shape, for a TRL without environment-owned rewards (``get_reward``):
    pass this or rely on ``get_reward``, not both, or the score counts twice."""
    return [env.get_reward() for env in environments]
