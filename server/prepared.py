"""Episodes broken ahead of time for the rows a trainer announces.

A reset's own cost is CPU: inject the faults, start an inspector, judge every check
and gate to confirm the hosts are broken, take the first look (NOTES: ~0.7 s of the
machine's time each, so 8 resets at once on 2 cores cannot answer in 2 s). A trainer
knows its next rows before it asks for them (GRPO resets one row once per generation),
so it announces them (``POST /prepare``, ``ServerContext.announce``) and one worker
prepares them while the sessions step or the model thinks: ``take`` then hands over
a confirmed, looked-at episode in the time of a dict lookup.

A prepared episode is exactly a reset one: the same ``Episode.reset`` (warm host,
cached healthy baseline, faults, confirmation) and the same first look; only the
moment differs. Faults that act over time (a cron job that breaks again) go on acting
while it waits, as they would while an agent thinks. At most ``ahead`` episodes are
ready or being prepared at once: each holds booted containers.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..episodes.episode import Episode
from ..scenarios.schema import Scenario
from .hostview import HostView
from .monitor import Monitor

MOST_ANNOUNCED = 10_000
"""rows waiting to be prepared at most: an announcement past it is refused, not trimmed."""


@dataclass
class Ready:
    """A reset episode with its monitor and first look, waiting for a session."""

    episode: Episode
    monitor: Monitor
    view: HostView


Opener = Callable[[Scenario, int, str], Episode]
Looker = Callable[[Episode], tuple[Monitor, HostView]]


def prepared_episode_id(scenario: Scenario, seed: int) -> str:
    return f"{scenario.slug}-s{seed}-{secrets.token_hex(3)}"


class Prepared:
    """The announced rows not yet prepared, the ready episodes by (task, seed), and the
    worker thread that turns the first into the second (started by the first announcement)."""

    def __init__(self, open_episode: Opener, first_look: Looker, *, ahead: int, log: Callable[[str], None]):
        if ahead < 1:
            raise ValueError("ahead must be at least 1")
        self.ahead = ahead
        self._open = open_episode
        self._look = first_look
        self._log = log
        self._wanted: deque[tuple[Scenario, int]] = deque()
        self._ready: dict[tuple[str, int], list[Ready]] = {}
        self._busy = 0
        self._closed = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self.failures = 0
        """preparations that raised (logged): the row is then reset cold when asked."""

    def announce(self, rows: list[tuple[Scenario, int]]) -> int:
        """Queue ``rows`` (in the order they will be asked for); returns how many wait now."""
        with self._cond:
            if self._closed:
                raise RuntimeError("closed")
            if len(self._wanted) + len(rows) > MOST_ANNOUNCED:
                raise ValueError(
                    f"{len(rows)} rows would make {len(self._wanted) + len(rows)} waiting, "
                    f"more than {MOST_ANNOUNCED}: announce the next batch only"
                )
            self._wanted.extend(rows)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="fixos-prepare", daemon=True)
                self._thread.start()
            self._cond.notify_all()
            return len(self._wanted)

    def take(self, task_id: str, seed: int) -> Ready | None:
        """A ready episode of this row, or None (the caller resets one itself)."""
        with self._cond:
            ready = self._ready.get((task_id, seed))
            if not ready:
                return None
            taken = ready.pop(0)
            if not ready:
                del self._ready[(task_id, seed)]
            self._cond.notify_all()  # a slot came free
            return taken

    def ready_count(self) -> int:
        with self._cond:
            return sum(len(r) for r in self._ready.values())

    def waiting_count(self) -> int:
        with self._cond:
            return len(self._wanted)

    def status(self) -> dict[str, int]:
        """One consistent look: rows waiting, being prepared, ready, and preparations failed."""
        with self._cond:
            return {
                "waiting": len(self._wanted),
                "preparing": self._busy,
                "ready": sum(len(r) for r in self._ready.values()),
                "failed": self.failures,
            }

    def wait_ready(self, count: int, timeout: float) -> bool:
        """Whether ``count`` episodes are ready within ``timeout`` seconds (benchmarks, tests)."""
        with self._cond:
            return (
                self._cond.wait_for(
                    lambda: sum(len(r) for r in self._ready.values()) >= count or self._closed, timeout
                )
                and not self._closed
            )

    def close(self) -> None:
        """Stop preparing and free every ready episode; one being prepared is freed by the worker."""
        with self._cond:
            self._closed = True
            self._wanted.clear()
            ready = [r for rows in self._ready.values() for r in rows]
            self._ready.clear()
            self._cond.notify_all()
            thread = self._thread
        for item in ready:
            _free(item)
        if thread is not None:
            thread.join(timeout=120)

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: (
                        self._closed
                        or (
                            self._wanted
                            and self._busy + sum(len(r) for r in self._ready.values()) < self.ahead
                        )
                    )
                )
                if self._closed:
                    return
                scenario, seed = self._wanted.popleft()
                self._busy += 1
            item, failed = None, False
            try:
                item = self._prepare(scenario, seed)
            except Exception as exc:  # the row is reset cold when asked; the worker goes on
                failed = True
                self._log(f"preparing {scenario.id} seed {seed} failed: {exc}")
            with self._cond:
                self._busy -= 1
                self.failures += failed
                if item is not None and not self._closed:
                    self._ready.setdefault((scenario.id, seed), []).append(item)
                    item = None
                self._cond.notify_all()
            if item is not None:  # closed while it was prepared
                _free(item)

    def _prepare(self, scenario: Scenario, seed: int) -> Ready:
        episode = self._open(scenario, seed, prepared_episode_id(scenario, seed))
        try:
            episode.reset()
            monitor, view = self._look(episode)
        except BaseException:
            episode.close()
            raise
        return Ready(episode, monitor, view)


def _free(item: Ready) -> None:
    with contextlib.suppress(Exception):
        item.monitor.close()
    item.episode.close()
