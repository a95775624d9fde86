"""What several commands share: argument types and reaching the Docker engines with their images."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import docker
from docker.errors import DockerException
from rich.console import Console
from rich.markup import escape

from ..bench.local import parse_shard
from ..core.errors import EngineError, FixOSError
from ..scenarios.schema import Scenario
from ..stack.engine import Engine, connect
from ..stack.images import ensure_image, replicate
from ..stack.leftovers import sweep_dead_runs

DEFAULT_RESULTS = Path("results")


MAX_EPISODES = 1000
"""episodes one command runs at most unless --max-episodes says more (a full bench is ~100)."""
_SEED_PART = re.compile(r"^(\d{1,18})(?:-(\d{1,18}))?$")


@dataclass(frozen=True)
class Seeds:
    """Seeds as given (``3``, ``1-5``, ``1,4,9``): disjoint ascending ranges, counted without
    being listed, so ``1-100000000`` is refused by the episode cap instead of filling memory."""

    ranges: tuple[range, ...]

    def __len__(self) -> int:
        return sum(len(r) for r in self.ranges)

    def __iter__(self) -> Iterator[int]:
        for r in self.ranges:
            yield from r

    def within(self, per_seed: int, cap: int, what: str = "episodes") -> list[int]:
        """The seeds as a list, unless ``per_seed`` x their count exceeds ``cap``."""
        total = per_seed * len(self)
        if total > cap:
            raise UsageError(
                f"{len(self)} seed(s) make {total} {what}, over the cap of {cap}; "
                "ask for fewer or raise it with --max-episodes"
            )
        return list(self)


class UsageError(FixOSError):
    """A command line that asks for something impossible or unbounded."""


def parse_seeds(text: str) -> Seeds:
    """``3``, ``1-5`` or ``1,4,9``; an empty or reversed range is an error, repeats count once."""
    spans: list[tuple[int, int]] = []
    for part in text.split(","):
        match = _SEED_PART.match(part.strip())
        if not match:
            raise argparse.ArgumentTypeError(
                f"seeds must look like 3, 1-5 or 1,4,9 (got {text[:50]!r}{'...' if len(text) > 50 else ''})"
            )
        lo, hi = int(match[1]), int(match[2] or match[1])
        if hi < lo:
            raise argparse.ArgumentTypeError(f"seed range {part.strip()} is reversed (write {hi}-{lo})")
        spans.append((lo, hi))
    merged: list[list[int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return Seeds(tuple(range(lo, hi + 1) for lo, hi in merged))


def max_episodes_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-episodes",
        type=positive,
        default=MAX_EPISODES,
        metavar="N",
        help=f"refuse to run more episodes than this (default: {MAX_EPISODES})",
    )


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1 (got {text[:50]!r})")
    return int(text)


def port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"must be a TCP port, 1-65535 (got {text[:50]!r})")
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


def engine(console: Console, url: str | None = None, prefix: str = "") -> docker.DockerClient:
    client = connect(url)
    sweep(client, console, prefix)
    return client


def sweep(client: docker.DockerClient, console: Console, prefix: str = "") -> None:
    swept = sweep_dead_runs(client)
    if swept:
        line = f"{prefix}removed leftovers of dead run(s): {', '.join(swept)}"
        console.print(escape(line), highlight=False)


def sweep_if_engine(console: Console, urls: Sequence[str] | None = None) -> None:
    """The sweep for commands that need no engine (list, show, verify): done when one
    answers within a few seconds, silently skipped when none does."""
    for url in urls or [None]:
        try:
            client = connect(url, timeout=5)
        except EngineError:
            continue
        try:
            sweep(client, console)
        except DockerException:
            pass  # best effort: the command itself needs no engine
        finally:
            client.close()


def engines(
    urls: Sequence[str] | None, scenarios: Sequence[Scenario], console: Console, prefix: str = ""
) -> list[Engine]:
    """Every engine asked for (the local one by default), each with the images present on it:
    built on the first, copied to the others. ``prefix`` goes before the sweep's line
    (``fixos setup``'s ``[setup] ``: set-up prints only such lines)."""
    found: list[Engine] = []
    for url in urls or [None]:
        client = engine(console, url, prefix)
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
    console.print(escape(f"[setup] {line.splitlines()[0]}"), highlight=False, soft_wrap=True)


def images(client: docker.DockerClient, scenarios: Sequence[Scenario], console: Console) -> dict[str, str]:
    # the inspector: the verifier's vantage point on every host (fixos.episodes.inspection)
    names = sorted({h.image for s in scenarios for h in s.hosts} | {"inspector"})
    return {name: ensure_image(client, name, lambda line: say(console, line)) for name in names}
