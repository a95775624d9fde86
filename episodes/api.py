"""The Python entry point for agent authors::

import fixos

with fixos.episode("hard_1", seed=3) as ep:
    print(ep.shell.run("ps aux").output)
    verdict = ep.verify()

A multi-host scenario's shell opens on its login host; ``ep.shell("db")`` opens one
on another of its hosts (and ``ep.shell.run("ssh db ...")`` works from the login host).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..scenarios.catalog import load_catalog, select
from ..scenarios.schema import SCENARIO_DIR
from ..stack.engine import connect
from ..stack.images import ensure_image
from .episode import Episode


@contextmanager
def episode(
    scenario: str,
    seed: int = 1,
    *,
    transport: str = "exec",
    docker_host: str | None = None,
    scenario_dir: Path = SCENARIO_DIR,
    task: str = "repair",
) -> Iterator[Episode]:
    """A confirmed-broken host for ``scenario``; removed when the block ends, however it ends.
    ``task``: the task level (``fixos.episodes.tasks``: repair, diagnose, localise, detect)."""
    chosen = select(load_catalog(scenario_dir, only=[scenario]), [scenario])[0]
    client = connect(docker_host)
    names = {h.image for h in chosen.hosts} | {"inspector"}  # the verifier's vantage point
    images = {name: ensure_image(client, name, lambda line: None) for name in names}
    with Episode(chosen, seed, client=client, images=images, transport=transport, task=task) as ep:
        yield ep
