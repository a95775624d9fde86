"""results/<run-id>/: one line per finished episode, made durable as it ends, and a
directory per episode with its transcript, faults and reward."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..core.models import Step
from .atif import write_trajectory
from .models import EpisodeRecord, FaultsFile, RewardFile, StepLine
from .saved import append_line, read_lines, read_model, write_lines, write_model

TRANSCRIPT = "transcript.jsonl"
REWARD = "reward.json"
FAULTS = "faults.json"
INTERRUPTED = "interrupted.json"


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
            write_model(directory / REWARD, RewardFile.of(record.verdict))
        write_model(directory / FAULTS, FaultsFile(faults=record.faults))
        lines = [StepLine.of(step) for step in steps]
        write_lines(directory / TRANSCRIPT, lines)
        write_trajectory(directory, record, lines)  # the same steps in Harbor's format (ATIF)
        # A resumed run finished what a stop cut short: the old account no longer holds.
        (directory / INTERRUPTED).unlink(missing_ok=True)
        # The journal line goes last and is synced: a line there means the episode is complete.
        append_line(self.episodes, record)
        return directory

    def records(self) -> list[EpisodeRecord]:
        if not self.episodes.exists():
            return []
        return read_lines(EpisodeRecord, self.episodes)


def write_interrupted(directory: Path, record: EpisodeRecord, steps: Iterable[Step]) -> Path:
    """What an episode that was stopped (Ctrl-C, SIGTERM) got to: its record, marked
    interrupted, and the commands it ran. Never in the journal, so ``--resume`` runs it again."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = [StepLine.of(step) for step in steps]
    write_lines(directory / TRANSCRIPT, lines)
    write_trajectory(directory, record, lines)
    write_model(directory / INTERRUPTED, record)
    return directory / INTERRUPTED


def read_interrupted(directory: Path) -> EpisodeRecord | None:
    path = directory / INTERRUPTED
    return read_model(EpisodeRecord, path) if path.exists() else None


def read_transcript(directory: Path) -> list[StepLine]:
    """An episode directory's steps; none when it has no transcript."""
    path = directory / TRANSCRIPT
    return read_lines(StepLine, path) if path.exists() else []


def read_reward(directory: Path) -> RewardFile | None:
    path = directory / REWARD
    return read_model(RewardFile, path) if path.exists() else None
