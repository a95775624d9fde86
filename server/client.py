"""The OpenEnv client for a FixOS server: one WebSocket session, one live host per reset.

from fixos.server import FixOSAction, FixOSEnv

with FixOSEnv(base_url="http://127.0.0.1:8000").sync() as env:
    env.prepare(scenario="easy_1", seed=1)          # with --prepare-ahead: broken before it is asked
    result = env.reset(scenario="easy_1", seed=1)   # task_id= works too; task="diagnose" for a report
    result = env.step(FixOSAction(command="service nginx status"))
    print(result.reward, result.observation.task_score)
    result = env.step(FixOSAction(report={"healthy": False, "findings": [...]}))  # kept, not yet graded
    result = env.step(FixOSAction(command="DONE"))   # final score: result.observation.task_score
    print(result.observation.diagnosis)              # the report's grade, beside the score
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from openenv.core import EnvClient
from openenv.core.client_types import StepResult

from .models import FixOSAction, FixOSObservation, FixOSState

DEFAULT_URL = "http://127.0.0.1:8000"
"""where ``fixos serve`` listens by default; ``FIXOS_URL`` overrides it."""
MESSAGE_TIMEOUT_S = 300.0
"""how long an answer may take (OpenEnv's default: 60 s). A step runs a command of up to 40 s
(the server's cap; 90 s uncapped, the longest a scenario allows) and is then judged; a reset
boots and confirms up to three hosts, slower under load."""
TASK_ID_NAMES = ("task_id", "scenario", "scenario_id")
"""the names a reset or a row may give the task id by; one of them at a time."""
RESET_FIELDS = frozenset({*TASK_ID_NAMES, "seed", "task", "level", "episode_id"})


@dataclass(frozen=True)
class PrepareStatus:
    """The server's episodes prepared ahead (``GET /prepare``)."""

    ahead: int
    """the server's ``--prepare-ahead``: at most this many ready or being prepared; 0 prepares none."""
    waiting: int
    """announced rows not started yet."""
    preparing: int
    ready: int
    """episodes broken and looked at, waiting for the reset of their row."""
    failed: int
    """preparations that raised (the server logs why); those rows are reset cold."""
    skipped: int = 0
    """rows of the last announcement not prepared: report-only tasks are always reset cold."""


class FixOSEnv(EnvClient[FixOSAction, FixOSObservation, FixOSState]):
    def __init__(
        self, base_url: str | None = None, message_timeout_s: float = MESSAGE_TIMEOUT_S, **kwargs: Any
    ) -> None:
        if base_url is None and kwargs.get("provider") is None:
            base_url = os.environ.get("FIXOS_URL", DEFAULT_URL)
        super().__init__(base_url=base_url, message_timeout_s=message_timeout_s, **kwargs)

    async def _reset_async(self, **kwargs: Any) -> StepResult[FixOSObservation]:
        # every reset goes through here, sync or async: the names are checked before the
        # server sees them (it would ignore an unknown one and start the next task instead)
        return await super()._reset_async(**_reset_fields(kwargs))

    def prepare(
        self,
        rows: Iterable[Mapping[str, Any]] | None = None,
        *,
        scenario: str | None = None,
        task_id: str | None = None,
        seed: int = 1,
        task: str | None = None,
        n: int = 1,
    ) -> Any:
        """Announce the rows this trainer resets next, in order, so the server breaks them ahead
        (``fixos serve --prepare-ahead N``): ``rows`` as dataset rows (``task_id`` or
        ``scenario``, ``seed``, ``task``; other columns ignored), or one row ``n`` times (a GRPO
        group). A reset of such a row then takes a ready episode. Returns a PrepareStatus."""
        if rows is None:
            if scenario is None and task_id is None:
                raise TypeError("prepare(): name the task (scenario= or task_id=), or give rows")
            rows = [{"task_id": task_id, "scenario": scenario, "seed": seed, "task": task}] * n
        elif scenario is not None or task_id is not None or task is not None or n != 1:
            raise TypeError("prepare(): give rows, or one row by scenario/task_id, seed, task and n")
        body = {"rows": [_row(row, i) for i, row in enumerate(rows)]}
        return self._dispatch(lambda: self._http("POST", "/prepare", body))

    def prepare_status(self) -> Any:
        """How many announced rows wait, are being prepared, are ready (a PrepareStatus)."""
        return self._dispatch(lambda: self._http("GET", "/prepare", None))

    async def _http(self, method: str, path: str, body: dict[str, Any] | None) -> PrepareStatus:
        if self._base_url is None:
            raise RuntimeError("FixOSEnv has no base URL yet: connect() first")
        url = self._base_url.replace("ws://", "http://", 1).replace("wss://", "https://", 1) + path
        timeout = httpx.Timeout(self._message_timeout, connect=self._connect_timeout)
        async with httpx.AsyncClient(timeout=timeout, headers=self._headers) as http:
            answer = await http.request(method, url, json=body)
        if answer.status_code != 200:
            detail = (
                answer.json().get("detail")
                if answer.headers.get("content-type", "").startswith("application/json")
                else answer.text
            )
            raise RuntimeError(f"{method} {path}: {answer.status_code} {detail}")
        return PrepareStatus(**answer.json())

    def _step_payload(self, action: FixOSAction) -> dict[str, Any]:
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[FixOSObservation]:
        observation = FixOSObservation(
            **payload.get("observation", {}), reward=payload.get("reward"), done=payload.get("done", False)
        )
        return StepResult(
            observation=observation,
            reward=payload.get("reward"),
            done=payload.get("done", False),
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> FixOSState:
        return FixOSState(**payload)


def _task_id(fields: Mapping[str, Any], where: str) -> str | None:
    named = {k: fields[k] for k in TASK_ID_NAMES if fields.get(k) is not None}
    if len(set(named.values())) > 1:
        raise ValueError(
            f"{where}: {' and '.join(f'{k}={v!r}' for k, v in named.items())} name different tasks"
        )
    return next(iter(named.values()), None)


def _reset_fields(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(kwargs) - RESET_FIELDS)
    if unknown:
        raise TypeError(f"reset() takes {', '.join(sorted(RESET_FIELDS))}; not {', '.join(unknown)}")
    fields = {k: v for k, v in kwargs.items() if k not in TASK_ID_NAMES and v is not None}
    task_id = _task_id(kwargs, "reset()")
    return fields if task_id is None else {"task_id": task_id, **fields}


def _row(row: Mapping[str, Any], index: int) -> dict[str, Any]:
    task_id = _task_id(row, f"rows[{index}]")
    if task_id is None:
        raise ValueError(f"rows[{index}]: name the task ({' or '.join(TASK_ID_NAMES)}); got {dict(row)!r}")
    out: dict[str, Any] = {"task_id": task_id}
    for key in ("seed", "task"):
        if row.get(key) is not None:
            out[key] = int(row[key]) if key == "seed" else row[key]
    return out
