"""Whether the harness that runs this thread is stopping (Ctrl-C, SIGTERM).

A bench runs each episode in a worker thread; it points that thread at its stop
event (``watch``). Whatever waits long in a worker, an agent waiting for a human,
a model's reply, the agent's next command, asks ``stop_requested()`` and gives
up within a poll, so the bench's workers end and the process exits in seconds.
"""

from __future__ import annotations

import threading

_local = threading.local()


def watch(event: threading.Event) -> None:
    """Make ``event`` the stop signal of the calling thread (a bench worker's initializer)."""
    _local.event = event


def stop_requested() -> bool:
    event: threading.Event | None = getattr(_local, "event", None)
    return event is not None and event.is_set()


def stop_event() -> threading.Event | None:
    """The calling thread's stop event, to hand to a helper thread it starts."""
    return getattr(_local, "event", None)


def check_stop() -> None:
    """Unwind like Ctrl-C when the harness is stopping: no verdict is taken, every ``finally`` runs."""
    if stop_requested():
        raise KeyboardInterrupt
