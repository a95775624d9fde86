"""FixOS: a benchmark of agents repairing real, broken servers.

``fixos.episode(scenario, seed)`` is the Python API (see ``fixos.episodes.api``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["episode"]


def __getattr__(name: str) -> Any:
    # Imported on first use: the data modules must not pull in docker and paramiko.
    if name == "episode":
        from fixos.episodes.api import episode

        return episode
    raise AttributeError(f"module 'fixos' has no attribute {name!r}")
