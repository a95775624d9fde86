"""The parts of a recipe: ``Need`` (a check a repair must pass), ``Recipe``, the causes."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CAUSES = (
    "config_error",
    "service_stopped",
    "resource_exhaustion",
    "port_conflict",
    "permission",
    "dependency",
    "network_policy",
    "certificate",
    "scheduled_rebreaker",
    "data_corruption",
)
"""the root-cause classes a diagnosis may name (small and fixed; docs/generated.md)."""

ANY = ("all", "web", "app", "db")
THREADS = (
    "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'THREADS_CONNECTED'"
)


@dataclass(frozen=True)
class Need:
    """One scored check a repair must pass. ``on``: ``here`` (the fault's host), or the
    role whose host it runs on (``web``, ``app``; the one host when the shop is on one)."""

    name: str
    type: str
    params: dict[str, Any] = field(default_factory=dict)
    on: str = "here"
    needs: tuple[str, ...] = ()
    """services (on the host the check runs against) that must be up for it to pass:
    a partial repair that leaves one of them down cannot expect this check to pass."""
    needs_on: tuple[tuple[str, str], ...] = ()
    """(role, service) it needs up on another host: ``db_reachable`` from app needs MariaDB on db"""
    reads: tuple[str, ...] = ()
    """the shop's pages it fetches (an ``http_page`` its own path): a fault that breaks one
    fails it too (``tls_valid`` fetches ``/``: 403 behind a locked web root, gen:2:30)."""


def running(service: str, port: int | None = None, program: str = "") -> tuple[Need, ...]:
    checks = [Need(f"{service} is running", "service_running", {"service": service}, needs=(service,))]
    if port is not None:
        checks.append(
            Need(
                f"{service} listens on {port}",
                "port_listening",
                {"port": port, "program": program},
                needs=(service,),
            )
        )
    return tuple(checks)


@dataclass(frozen=True)
class Recipe:
    type: str
    roles: tuple[str, ...]
    symptom: str
    """what a user or the monitoring reports, in their words (``{host}``: where it fires)."""
    cause: str
    component: str
    """the canonical part it breaks, relative to its host: ``service:nginx``, ``fs:/var/log``..."""
    params: Callable[[random.Random], dict[str, Any]] = lambda rng: {}
    own: tuple[Need, ...] = ()
    pages: tuple[str, ...] = ()
    """the shop's pages it breaks, judged from outside on the web host"""
    hold: float = 0.0
    """seconds a broken page must keep answering (a fault that returns: a watchdog, a cron job)"""
    starts: tuple[str, ...] = ()
    """services its repair leaves to start (its fix undoes its change only)"""
    reloads: tuple[str, ...] = ()
    caps: tuple[str, ...] = ()
    host: dict[str, Any] = field(default_factory=dict)
    weight: int = 1
    culprit: bool = False
    """a program of its own makes the harm (its name is drawn, it does not name itself)"""
    returns: bool = False
    """it breaks the host again until its cause is removed"""
    breaks: tuple[str, ...] = ()
    """check types it fails though it does not own them (a wrong address for db fails
    ``db_reachable`` from app): a partial repair leaving it cannot expect those to pass"""
    excludes: tuple[tuple[str, str], ...] = ()
    """(recipe key, why): variants it cannot share a host with though no claim says so,
    each found by live validation (the world's id in ``why``)"""

    @property
    def key(self) -> str:
        """type and the parameters that change what breaks: the unit of a world's combination."""
        return self.type + "".join(
            f":{v}" for v in self.params(random.Random(0)).values() if isinstance(v, str)
        )


def pid(rng: random.Random) -> int:
    # pinned, so a world's export is the same bytes on every machine; above what a fresh
    # host's boot uses, below where the pids of a busy host go. One pin a host: a second,
    # higher one found the counter past it (the first's spawn and the judge's sessions take
    # PIDs in between), so only the port squatter pins, and it is one a host by its claims.
    return rng.randrange(905, 990)
