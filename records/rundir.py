"""results/<run-id>/: one line per finished episode, made durable as it ends."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from fixos.core.models import EpisodeRecord, Step, to_json


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")


class RunDir:
    def __init__(self, root: Path, run_id: str) -> None:
        self.run_id = run_id
        self.path = root / run_id
        self.path.mkdir(parents=True, exist_ok=True)
        self.episodes = self.path / "episodes.jsonl"

    def episode_dir(self, episode_id: str) -> Path:
        directory = self.path / episode_id
        directory.mkdir(parents=True, exist_ok=True)
        return directory

    def write_episode(self, record: EpisodeRecord, steps: Iterable[Step]) -> Path:
        directory = self.episode_dir(record.episode_id)
        if record.verdict is not None:
            _write_json(directory / "reward.json", record.verdict.reward_json())
        _write_json(directory / "faults.json", to_json(record.faults))
        with (directory / "transcript.jsonl").open("w", encoding="utf-8") as f:
            for step in steps:
                f.write(json.dumps(to_json(step)) + "\n")
        # The journal line goes last and is synced: a line there means the episode is complete.
        with self.episodes.open("a", encoding="utf-8") as f:
            f.write(json.dumps(to_json(record)) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return directory

    def records(self) -> list[dict[str, Any]]:
        if not self.episodes.exists():
            return []
        return [json.loads(line) for line in self.episodes.read_text().splitlines() if line.strip()]
