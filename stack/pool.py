"""Warm hosts: stacks booted ahead of time in the background, so an episode's
reset is "take a booted host, inject, confirm" instead of a boot.

A pool belongs to one run on one engine: its containers carry the run's labels
and this process as owner, so ``fixos clean --run`` and the sweep of dead runs
find them like any episode's. Stacks are never reused: an episode takes one,
and gives it back only to be removed (in the background, off the episode's
clock).
"""

from __future__ import annotations

import contextlib
import queue
import secrets
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence

import docker

from ..core.errors import StackError
from ..scenarios.schema import HostSpec
from ..shells.stopping import check_stop
from .hosts import BOOT_TIMEOUT, Stack
from .judge import Judge
from .networks import EpisodeNetworks

STOP_POLL = 0.25
"""seconds between looks at the bench's stop while a take waits for a spare."""

Shape = tuple[str, ...]
"""what makes two stacks interchangeable: their host specs, serialised."""


def shape_of(hosts: Sequence[HostSpec]) -> Shape:
    return tuple(h.model_dump_json() for h in hosts)


class HostPool:
    """Keeps booted stacks ready, plus one per waiting taker.

    ``planned`` lists, in order, the hosts each take is expected to ask for (a
    bench knows its jobs): the pool keeps ready what the next ``size`` takes of
    the plan will ask for, so spares stay ``size`` in all however many shapes a
    catalogue mixes (one-host, three-host, with NET_ADMIN...), and the end of a
    run wastes no boots. A take beyond the plan (a retry) still gets a host.
    Without a plan, every shape in ``shapes`` keeps ``size`` spares.
    """

    def __init__(
        self,
        client: docker.DockerClient,
        images: dict[str, str],
        *,
        run_id: str,
        size: int,
        shapes: Sequence[Sequence[HostSpec]] = (),
        planned: Sequence[Sequence[HostSpec]] | None = None,
        boots_at_once: int | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self._client, self._images, self.run_id = client, images, run_id
        self.size = max(1, size)
        self._specs = {shape_of(s): list(s) for s in [*shapes, *(planned or [])]}
        self._ready: dict[Shape, deque[Stack]] = {k: deque() for k in self._specs}
        self._booting: dict[Shape, int] = dict.fromkeys(self._specs, 0)
        self._waiting: dict[Shape, int] = dict.fromkeys(self._specs, 0)
        self._failures: dict[Shape, str | None] = dict.fromkeys(self._specs, None)
        self._resetting = 0
        """episode resets under way (``resetting``): refills wait for them unless a taker is short."""
        self._lock = threading.Condition()
        self._closed = False
        self._plan: list[Shape] | None = None if planned is None else [shape_of(h) for h in planned]
        """the shapes of the planned takes not yet made, in order (None: no plan)."""
        self._on_error = on_error
        # Boots mostly wait on daemons starting; a few at once fill a pool faster without
        # starving the episodes beside them. Four, not three: at -j 4 the fourth episode
        # waited a whole boot (8 easy_1 oracle episodes: 37.6 -> 42.7 episodes/min).
        workers = boots_at_once or max(1, min(self.size, 4))
        self._fillers = [
            threading.Thread(target=self._fill, name=f"pool-fill-{i}", daemon=True) for i in range(workers)
        ]
        self._networks = EpisodeNetworks(client, keep=True, wanted=self._network_wanted)
        """the run's networks: a removed stack's is handed to a later one (``EpisodeNetworks``)."""
        self._doomed: queue.Queue[Stack | None] = queue.Queue()
        # A forced remove costs the engine ~0.3 s; two keep up with a busy run.
        self._removers = [
            threading.Thread(target=self._remove, name=f"pool-remove-{i}", daemon=True) for i in range(2)
        ]
        self.judge = Judge(client, images["inspector"], run_id=run_id) if "inspector" in images else None
        """the engine's long-lived judge for every episode of this pool (``fixos.stack.judge``),
        started beside the first boots rather than after them, by the first reset."""
        if self.judge is not None:
            threading.Thread(target=lambda: self.judge.usable, name="judge-start", daemon=True).start()
        self.baselines: dict[str, dict] = {}
        """healthy-host evidence per (checks, hosts, image ids, code; ``fixos.records.baselines``):
        identical hosts give identical evidence, so it is recorded once and reused."""
        for thread in (*self._fillers, *self._removers):
            thread.start()

    # -- for episodes -----------------------------------------------------

    def take(self, hosts: Sequence[HostSpec], episode_id: str) -> Stack:
        """A booted stack of this shape, renamed for the episode (booted now if none is ready)."""
        shape = shape_of(hosts)
        if shape not in self._specs:
            stack = self._new_stack(list(hosts), f"{self.run_id}-{episode_id}")
            try:
                stack.up()
            except BaseException:
                self.discard(stack)
                raise
            return stack
        with self._lock:
            self._waiting[shape] += 1
            self._lock.notify_all()
            try:
                deadline = time.monotonic() + 2 * BOOT_TIMEOUT
                while not (ok := bool(self._ready[shape] or self._failures[shape] or self._closed)):
                    # a bench stopping (Ctrl-C) does not wait out a spare's boot
                    check_stop()
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._lock.wait(min(left, STOP_POLL))
                if self._closed:
                    raise StackError("the host pool is closed")
                if not ok:
                    raise StackError(f"no warm host within {2 * BOOT_TIMEOUT:g}s")
                if not self._ready[shape]:
                    failure, self._failures[shape] = self._failures[shape], None
                    raise StackError(f"warm host failed to boot: {failure}")
                stack = self._ready[shape].popleft()
                if self._plan is not None and shape in self._plan:
                    self._plan.remove(shape)  # the first one left: takes come roughly in plan order
            finally:
                self._waiting[shape] -= 1
                self._lock.notify_all()
        try:
            stack.claim(f"{self.run_id}-{episode_id}")
        except BaseException:
            self.discard(stack)
            raise
        return stack

    @contextlib.contextmanager
    def resetting(self) -> Iterator[None]:
        """Around an episode's reset: spare boots wait until no reset is under way.

        A boot is CPU-heavy (the engine, MariaDB's start) and a reset is short and
        waited for: with 8 sessions resetting at once, the 8 refills their takes set
        off would otherwise double each reset. A taker with no stack ready is never
        kept waiting: its boot starts at once."""
        with self._lock:
            self._resetting += 1
        try:
            yield
        finally:
            with self._lock:
                self._resetting -= 1
                self._lock.notify_all()

    def discard(self, stack: Stack) -> None:
        """Remove the stack in the background; ``close`` waits for every removal."""
        self._doomed.put(stack)

    def ready_count(self, hosts: Sequence[HostSpec] | None = None) -> int:
        """Booted stacks waiting to be taken (of this shape, or of all)."""
        with self._lock:
            if hosts is not None:
                return len(self._ready.get(shape_of(hosts), ()))
            return sum(len(q) for q in self._ready.values())

    def settle(self) -> None:
        """Wait until no stack is booting and every discarded one is removed: what a
        benchmark waits for between episodes whose phases it times, so that the pool's
        own work in the background is not counted in them."""
        with self._lock:
            self._lock.wait_for(lambda: self._closed or not any(self._booting.values()))
        self._doomed.join()

    def close(self) -> None:
        """Stop booting, remove every warm and every discarded stack, and wait for that."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        for thread in self._fillers:
            thread.join()
        # No episode asks the judge anything now: it goes beside the last stacks (~60 ms
        # of a bench's end, when it went after them).
        failed: list[BaseException] = []
        judge_closing = None
        if self.judge is not None:
            judge_closing = threading.Thread(target=_catching(self.judge.close, failed), name="judge-close")
            judge_closing.start()
        with self._lock:
            leftovers = [s for q in self._ready.values() for s in q]
            for q in self._ready.values():
                q.clear()
        for stack in leftovers:
            self._doomed.put(stack)
        for _ in self._removers:
            self._doomed.put(None)
        for thread in self._removers:
            thread.join()
        self._networks.close()
        if judge_closing is not None:
            judge_closing.join()
        if failed:
            raise failed[0]

    def __enter__(self) -> HostPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- background -------------------------------------------------------

    def _network_wanted(self) -> bool:
        """Whether a network given back now may serve a later boot: always without a plan;
        with one, while a planned take has no stack booted or booting for it. The run's
        last networks go with their stacks, beside its last episodes, not at close (where
        removing 4 took 1.6 s of a bench of 8 episodes: the engine removes one at a time)."""
        with self._lock:
            if self._plan is None:
                return True
            return len(self._plan) > sum(map(len, self._ready.values())) + sum(self._booting.values())

    def _new_stack(self, hosts: list[HostSpec], episode_id: str) -> Stack:
        return Stack(
            self._client,
            run_id=self.run_id,
            episode_id=episode_id,
            hosts=hosts,
            images=self._images,
            networks=self._networks,
        )

    def _wanted(self) -> Shape | None:
        """The shape most short of its target, or None when every shape has enough."""
        best, shortfall = None, 0
        upcoming = None if self._plan is None else Counter(self._plan[: self.size])
        # resets at work (a taker still waiting for its stack resets nothing yet: counting it
        # kept every spare's boot behind the reset it waited for, one boot at a time at -j 4)
        working = self._resetting - sum(self._waiting.values())
        for shape in self._specs:
            spares = self.size if upcoming is None else upcoming[shape]
            # A server's resets come first (a session waits on its own; a boot would slow it):
            # only takers who have nothing to take boot then. A planned run's spares boot
            # beside its resets: held back, the next wave's episodes waited for boots begun
            # late (8 easy_1 oracle episodes at -j 4: 10.17 -> 9.68 s, medians of 4 alternated).
            if working > 0 and upcoming is None:
                spares = 0
            target = max(self._waiting[shape], spares)
            short = target - len(self._ready[shape]) - self._booting[shape]
            if short > shortfall:
                best, shortfall = shape, short
        return best

    def _fill(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._closed or self._wanted() is not None)
                if self._closed:
                    return
                shape = self._wanted()
                assert shape is not None
                self._booting[shape] += 1
            stack = self._new_stack(self._specs[shape], f"{self.run_id}-warm-{secrets.token_hex(3)}")
            failure = None
            try:
                stack.up()
            except Exception as exc:  # reported to the next taker; the filler goes on
                failure = str(exc)
            with self._lock:
                self._booting[shape] -= 1
                if failure is None and not self._closed:
                    self._ready[shape].append(stack)
                    stack = None
                elif failure is not None:
                    self._failures[shape] = failure
                self._lock.notify_all()
            if stack is not None:
                self._doomed.put(stack)
            if failure is not None:
                if self._on_error is not None:
                    self._on_error(failure)
                with self._lock:  # a broken image must not turn into a busy loop of boots
                    self._lock.wait_for(lambda: self._closed, timeout=1.0)

    def _remove(self) -> None:
        while True:
            stack = self._doomed.get()
            if stack is None:
                self._doomed.task_done()  # so that a settle() after close() returns too
                return
            with contextlib.suppress(Exception):
                stack.down()
            self._doomed.task_done()


def _catching(work: Callable[[], object], failed: list[BaseException]) -> Callable[[], None]:
    """``work`` for a thread: what it raises is kept in ``failed`` for the joiner to raise."""

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # handed to the thread that joins
            failed.append(exc)

    return run
