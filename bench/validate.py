"""Scenario validation: the reference repair scores 1.0, doing nothing scores 0.0,
and a partial repair scores strictly between, on real containers.

A fault-free control is validated by its own rule: the oracle (touches nothing, reports
healthy) scores 1.0 for the repair and for the diagnosis; nop scores 1.0 for the repair
(nothing needed doing) and 0.0 for the diagnosis (it said nothing); ``meddler``
(restarts a service, writes a configuration back the same) scores 0.0."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import docker

from ..episodes.episode import run_episode
from ..records.models import EpisodeRecord
from ..scenarios.schema import Scenario
from ..stack.pool import HostPool

EXPECTED = {"oracle": "= 1.0", "nop": "= 0.0", "partial": "in (0, 1)"}
EXPECTED_OF_CONTROL = {
    "oracle": "= 1.0, diagnosis 1.0",
    "nop": "= 1.0, diagnosis 0.0",
    "meddler": "= 0.0",
}


def _diagnosis(record: EpisodeRecord) -> float | None:
    return None if record.diagnosis is None else record.diagnosis.score


def meets(agent: str, record: EpisodeRecord) -> bool:
    if not record.scored or record.reward is None:
        return False
    if record.control:
        wanted = {"oracle": (1.0, 1.0), "nop": (1.0, 0.0), "meddler": (0.0, None)}[agent]
        return record.reward == wanted[0] and wanted[1] in (None, _diagnosis(record))
    if agent == "oracle":
        return record.reward == 1.0
    if agent == "nop":
        return record.reward == 0.0
    return 0.0 < record.reward < 1.0


def _cut(text: str, most: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 3] + "..."


def why(agent: str, record: EpisodeRecord, *, checks: int = 8) -> list[str]:
    """Why ``record`` missed what ``agent`` must score, one line each (empty when it met it):
    the line of the reference repair that stopped, with its last output; the harness's
    failure; else the checks that decided the reward (failed ones for a repair scored too
    low, passed scored ones for a reward too high). At most ``checks`` checks."""
    if meets(agent, record):
        return []
    if not record.scored or record.reward is None:
        return [f"{record.status}: {record.error}"]
    wanted = (EXPECTED_OF_CONTROL if record.control else EXPECTED)[agent]
    said = f", diagnosis {_diagnosis(record)}" if record.control else ""
    lines = [f"{agent} scored {record.reward:.2f}{said}, wanted {wanted}"]
    failure = record.failure
    if failure is not None and failure.script is not None:
        lines.append(failure.script.describe() + (", its last output:" if failure.script.output else ""))
        lines += [f"  | {line}" for line in failure.script.output.splitlines()]
    elif failure is not None:
        lines.append(failure.text)
    results = record.verdict.checks if record.verdict is not None else []
    if record.control and agent == "meddler":  # too high: the gate did not see the meddling
        found = [f"check passed after meddling: {c.name}: {_cut(c.detail)}" for c in results if c.passed]
    elif agent == "oracle" or record.reward == 0.0:  # too low: what is still broken
        found = [
            f"check failed: {c.name} ({'scored' if c.scored else 'gate'}): {_cut(c.detail)}"
            for c in results
            if not c.passed
        ]
    elif agent == "nop":  # too high: what passed with nothing done
        found = [
            f"check passed without a repair: {c.name}: {_cut(c.detail)}"
            for c in results
            if c.passed and c.scored
        ]
    else:
        found = ["every check passed: the partial repair repairs it all"]
    if len(found) > checks:
        found = [*found[:checks], f"(+{len(found) - checks} more checks)"]
    return lines + found


@dataclass
class Validation:
    scenario: str
    seed: int
    records: dict[str, EpisodeRecord] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(meets(agent, r) for agent, r in self.records.items())


def agents_for(scenario: Scenario) -> list[str]:
    if not scenario.faults:
        return ["oracle", "nop", "meddler"]
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
