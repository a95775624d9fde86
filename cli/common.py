"""What several commands share: argument types and reaching the Docker engines with their images."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import docker
from rich.console import Console
from rich.markup import escape

from fixos.bench import parse_shard
from fixos.scenarios.schema import Scenario
from fixos.stack.engine import Engine, connect
from fixos.stack.hosts import sweep_dead_runs
from fixos.stack.images import ensure_image, replicate

DEFAULT_RESULTS = Path("results")


def parse_seeds(text: str) -> list[int]:
    """``3``, ``1-5`` or ``1,4,9``."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            seeds += list(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must look like 3, 1-5 or 1,4,9 (got {text!r})") from None
    return seeds


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1 (got {text!r})")
    return int(text)


def shard(text: str) -> tuple[int, int]:
    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def docker_host_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--docker-host",
        action="append",
        metavar="URL",
        help="a Docker engine (unix://, tcp://, ssh://); repeat to spread over several "
        "(default: DOCKER_HOST or the local socket)",
    )


def engine(console: Console, url: str | None = None) -> docker.DockerClient:
    client = connect(url)
    swept = sweep_dead_runs(client)
    if swept:
        console.print(f"removed leftovers of dead run(s): {', '.join(swept)}")
    return client


def engines(urls: Sequence[str] | None, scenarios: Sequence[Scenario], console: Console) -> list[Engine]:
    """Every engine asked for (the local one by default), each with the images present on it:
    built on the first, copied to the others."""
    found: list[Engine] = []
    for url in urls or [None]:
        client = engine(console, url)
        if not found:
            tags = images(client, scenarios, console)
        else:
            first = found[0]
            tags = {
                name: replicate(first.client, client, tag, lambda line: say(console, line), url or "")
                for name, tag in first.images.items()
            }
        found.append(Engine(url or "local", client, tags))
    return found


def say(console: Console, line: str) -> None:
    console.print(escape(f"[setup] {line.splitlines()[0][:100]}"), highlight=False, soft_wrap=True)


def images(client: docker.DockerClient, scenarios: Sequence[Scenario], console: Console) -> dict[str, str]:
    # the inspector: the verifier's vantage point on every host (fixos.inspection)
    names = sorted({h.image for s in scenarios for h in s.hosts} | {"inspector"})
    return {name: ensure_image(client, name, lambda line: say(console, line)) for name in names}
