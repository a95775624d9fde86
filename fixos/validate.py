"""Scenario validation: the reference repair scores 1.0, doing nothing scores 0.0,
and a partial repair scores strictly between, on real containers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import docker

from fixos.episodes import run_episode
from fixos.records.models import EpisodeRecord
from fixos.scenarios.schema import Scenario
from fixos.stack.pool import HostPool

EXPECTED = {"oracle": "= 1.0", "nop": "= 0.0", "partial": "in (0, 1)"}


def meets(agent: str, record: EpisodeRecord) -> bool:
    if not record.scored or record.reward is None:
        return False
    if agent == "oracle":
        return record.reward == 1.0
    if agent == "nop":
        return record.reward == 0.0
    return 0.0 < record.reward < 1.0


@dataclass
class Validation:
    scenario: str
    seed: int
    records: dict[str, EpisodeRecord] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(meets(agent, r) for agent, r in self.records.items())


def agents_for(scenario: Scenario) -> list[str]:
    return ["oracle", "nop"] + (["partial"] if scenario.partial_solution else [])


def validate(
    scenario: Scenario,
    seed: int,
    *,
    client: docker.DockerClient,
    images: dict[str, str],
    run_id: str,
    on_record: Callable[[EpisodeRecord], None] | None = None,
    pool: HostPool | None = None,
) -> Validation:
    result = Validation(scenario.id, seed)
    for agent in agents_for(scenario):
        record, _ = run_episode(scenario, seed, agent, client=client, images=images, run_id=run_id, pool=pool)
        result.records[agent] = record
        if on_record is not None:
            on_record(record)
    return result
