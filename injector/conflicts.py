"""Which faults can share a host: each fault claims the resources it breaks or needs.

A claim names a resource of the host (``service:mariadb``, ``port:80``,
``fill:/var/log``, ``config:nginx``...) and what the fault does with it, its
``state``. Two faults on the same host conflict when they claim the same
resource with different states ("down" and "up": one keeps MariaDB stopped,
the other must query it), or when either claims it ``own`` (two fills of one
filesystem: the second finds nothing left to fill). Same state, not ``own``,
is shared: three faults may all keep nginx down, each proving its own cause.

A fault type declares its claims either as a classmethod on its class::

    @classmethod
    def claims(cls, params: Params) -> list[Claim]:
        return [Claim("service:nginx", UP, "serves the bad certificate over HTTPS")]

or as a row of ``CLAIMS`` below (the types written before this module). A type
that declares nothing claims nothing, and shares a host with every fault: the
live pair sweep (tests/test_fault_pairs.py) is what proves that true.
``PAIRS`` holds the rare conflict between two types that no resource expresses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

OWN = "own"
"""the fault needs the resource to itself"""
UP = "up"
DOWN = "down"
CHANGES = "changes"
ACCOUNTS = "accounts:mariadb"
"""MariaDB's accounts and grants: a fault that changes them (state ``CHANGES``, shared) lets
the grant tables' gate accept them unseen when the faults also leave the server down."""


@dataclass(frozen=True)
class Claim:
    resource: str
    """what on the host: ``service:NAME``, ``port:N``, ``pid:N``, ``fill:PATH``, ``config:SERVICE``..."""
    state: str
    """what the fault does with it: ``up``/``down`` for a service, ``own`` to need it alone"""
    why: str
    """a phrase completing "<fault type> ...", for the conflict's reason"""


def _service(name: str, state: str, why: str) -> Claim:
    return Claim(f"service:{name}", state, why)


def _pids(params: Any) -> list[Claim]:
    pids = [params.pid] if hasattr(params, "pid") else (getattr(params, "pids", None) or [])
    return [Claim(f"pid:{pid}", OWN, f"must run as PID {pid}") for pid in pids if pid is not None]


ClaimRule = Callable[[Any], Iterable[Claim]]

CLAIMS: dict[str, ClaimRule] = {
    "service_stopped": lambda p: [_service(p.service, DOWN, f"keeps {p.service} stopped")],
    "config_broken": lambda p: [
        _service(p.service, DOWN, f"keeps {p.service} down with a broken config"),
        Claim(f"config:{p.service}", OWN, f"edits a line of {p.service}'s configuration"),
    ],
    "permissions_broken": lambda p: (
        [Claim("perms:/var/www/shop", OWN, "changes the web root's owner and modes")]
        if p.target == "web_root"
        else [
            Claim("perms:/var/lib/mysql", OWN, "changes MariaDB's data directory owner and modes"),
            _service("mariadb", DOWN, "keeps MariaDB from starting"),
        ]
    ),
    "dependency_broken": lambda p: (
        [
            _service("mariadb", UP, "must reach MariaDB to break and prove the app's account"),
            Claim("link:app_db", OWN, "breaks how the app reaches its database"),
            Claim(ACCOUNTS, CHANGES, "may rotate the app's password or revoke its grants"),
        ]
        if p.link == "app_db"
        else [Claim("config:php-fpm", OWN, "stops php-fpm or edits its pool's socket")]
    ),
    "connections_exhausted": lambda p: [
        _service("mariadb", UP, "holds MariaDB's connections, which needs MariaDB running"),
        Claim("mariadb:connections", OWN, "holds every MariaDB connection"),
        Claim(ACCOUNTS, CHANGES, "adds the batch job's account"),
    ],
    "disk_fill": lambda p: [Claim(f"fill:{p.path}", OWN, f"fills {p.path} to {p.percent}%")],
    "deleted_open_file": lambda p: [
        Claim(f"fill:{p.path}", OWN, f"fills {p.path} to {p.percent}% with a deleted file")
    ],
    # Its thousands of files leave no inode for another fault's junk files, and
    # the other's blocks are what it would need none of: either order breaks one.
    "inodes_exhausted": lambda p: [Claim(f"fill:{p.path}", OWN, f"uses up every inode of {p.path}")],
    "cpu_hog": _pids,
    "port_squatter": lambda p: [
        Claim(f"port:{p.port}", OWN, f"holds port {p.port}"),
        _service(p.service, DOWN, f"keeps {p.service} off its port"),
        *_pids(p),
    ],
    "memory_hog": lambda p: [Claim("memory", OWN, "holds most of the host's memory")],
    "service_killer": lambda p: [_service(p.service, DOWN, f"keeps killing {p.service}")],
    # Proven through what 443 serves, so nginx must run: a fault keeping it down
    # leaves nothing to serve the wrong certificate.
    "tls_expired": lambda p: [
        _service("nginx", UP, "proves the expired certificate by what nginx serves"),
        Claim("tls:shop", OWN, "swaps the site's certificate or the lines naming it"),
    ],
    "tls_wrong_name": lambda p: [
        _service("nginx", UP, "proves the wrong certificate by what nginx serves"),
        Claim("tls:shop", OWN, "swaps the site's certificate or the lines naming it"),
    ],
    "tls_key_mismatch": lambda p: [
        _service("nginx", DOWN, "keeps nginx down with a key that does not match"),
        Claim("tls:shop", OWN, "swaps the site's key or the line naming it"),
    ],
    "fd_limit": lambda p: (
        [_service("nginx", UP, "proves its connection limit by nginx's own log while it runs")]
        if p.service == "nginx"
        else [
            Claim("config:php-fpm", OWN, "edits php-fpm's file limit and restarts it"),
            # its restart would undo a fault that keeps php-fpm stopped (gen:5:20)
            _service("php8.2-fpm", UP, "restarts php-fpm with its new limit"),
        ]
    ),
    "fpm_pool_broken": lambda p: [
        Claim("config:php-fpm", OWN, "edits php-fpm's pool and restarts it"),
        _service("php8.2-fpm", UP, "restarts php-fpm with its edited pool"),
    ],
}

PAIRS: dict[frozenset[str], str] = {}
"""``{frozenset({type_a, type_b}): reason}``: conflicts no resource claim expresses."""


def claims_of(fault_class: Any, params: Any) -> list[Claim]:
    """What a fault of this class with these params claims (its own ``claims``, else ``CLAIMS``)."""
    declared = getattr(fault_class, "claims", None)
    if declared is not None:
        return list(declared(params))
    rule = CLAIMS.get(getattr(fault_class, "type", ""))
    return list(rule(params)) if rule else []


def declares_claims(fault_class: Any) -> bool:
    return getattr(fault_class, "claims", None) is not None or getattr(fault_class, "type", "") in CLAIMS


def _clash(a: Claim, b: Claim) -> bool:
    return a.resource == b.resource and (a.state != b.state or OWN in (a.state, b.state))


def conflict(type_a: str, claims_a: Sequence[Claim], type_b: str, claims_b: Sequence[Claim]) -> str | None:
    """Why two faults on one host cannot both be established, or None if they can."""
    pair = PAIRS.get(frozenset((type_a, type_b)))
    if pair is not None:
        return pair
    for a in claims_a:
        for b in claims_b:
            if _clash(a, b):
                return f"{type_a} {a.why} but {type_b} {b.why} ({a.resource})"
    return None


def first_conflict(faults: Sequence[tuple[str, str, Any]], registry: Any) -> tuple[int, int, str] | None:
    """The first pair ``(i, j, reason)`` of ``(host, type, params)`` faults that conflict, i < j."""
    claimed = [
        (host, kind, claims_of(registry.get(kind), params) if kind in registry else [])
        for host, kind, params in faults
    ]
    for j, (host_j, type_j, claims_j) in enumerate(claimed):
        for i, (host_i, type_i, claims_i) in enumerate(claimed[:j]):
            if host_i != host_j:
                continue
            reason = conflict(type_i, claims_i, type_j, claims_j)
            if reason is not None:
                return i, j, reason
    return None


def changes_accounts(faults: Sequence[tuple[str, str, Any]], registry: Any) -> set[str]:
    """The hosts where a fault claims MariaDB's accounts (``ACCOUNTS``): ``faults`` as
    (host, type, params)."""
    return {
        host
        for host, kind, params in faults
        if any(c.resource == ACCOUNTS for c in claims_of(registry.get(kind), params))
    }


def kept_down_by_returning(
    entries: Sequence[tuple[str, str, Any]], registry: Any = None
) -> dict[str, set[str]]:
    """Per host, the services a fault that keeps acting (``Fault.returns``) keeps down;
    ``registry``: every fault type when left out."""
    if registry is None:
        from .base import FAULTS  # the fault modules import this one: not at its top

        registry = FAULTS
    found: dict[str, set[str]] = {}
    for host, kind, params in entries:
        cls = registry.get(kind) if kind in registry else None
        if cls is None or not getattr(cls, "returns", False):
            continue
        for claim in claims_of(cls, params):
            if claim.resource.startswith("service:") and claim.state == DOWN:
                found.setdefault(host, set()).add(claim.resource.split(":", 1)[1])
    return found
