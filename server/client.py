"""The OpenEnv client for a FixOS server: one WebSocket session, one live host per reset.

from fixos.server import FixOSAction, FixOSEnv

with FixOSEnv(base_url="http://127.0.0.1:8000").sync() as env:
    result = env.reset(task_id="easy_1", seed=1)
    result = env.step(FixOSAction(command="service nginx status"))
    print(result.reward, result.observation.task_score)
    result = env.step(FixOSAction(report={"healthy": False, "findings": [...]}))  # kept, not yet graded
    result = env.step(FixOSAction(command="DONE"))   # final score: result.observation.task_score
    print(result.observation.diagnosis)              # the report's grade, beside the score
"""

from __future__ import annotations

from typing import Any

from openenv.core import EnvClient
from openenv.core.client_types import StepResult

from .models import FixOSAction, FixOSObservation, FixOSState


class FixOSEnv(EnvClient[FixOSAction, FixOSObservation, FixOSState]):
    def __init__(self, base_url: str | None = None, message_timeout_s: float = 300.0, **kwargs: Any) -> None:
        # A reset boots a host (seconds) and a step may run a command up to its timeout.
        super().__init__(base_url=base_url, message_timeout_s=message_timeout_s, **kwargs)

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
