"""The steady state every scenario inherits: what a healthy host is, as gates.

Each entry becomes one unscored check (a gate: failing it zeroes the reward)
per host of the scenario, named ``steady: ...`` so a verdict says which part of
the steady state the repair broke. A scenario adds its own checks beside these;
it cannot remove, replace or weaken one: a scenario check whose name starts
with ``steady:`` is a ScenarioError.

Every steady check records the healthy host (``snapshot``), drops from its gate
what the scenario's own faults disturbed (``refine``: those are the symptoms,
which the scenario's scored checks judge, with partial credit), and fails when
anything else differs from the healthy host.
"""

from __future__ import annotations

from typing import Any

STEADY_PREFIX = "steady:"

STEADY_STATE: list[dict[str, Any]] = [
    {"name": "programs and the loader are the image's", "type": "programs_unchanged"},
    {"name": "owners and modes are the healthy host's", "type": "modes_unchanged"},
    {"name": "the logs the site writes still exist", "type": "logs_kept"},
    {"name": "every table is the healthy host's", "type": "database_unchanged"},
    {"name": "services run as their init scripts start them", "type": "services_official"},
    {"name": "the pages are the healthy host's, from outside", "type": "pages_unchanged"},
    # "Restart only what the scenario names" after killing everything passes every
    # other gate: the box's other programs (cron, sshd, the app's helpers) are part
    # of its health too.
    {"name": "every program of the healthy host still runs", "type": "processes_intact"},
    # ... and nothing else: a loop left forking, a sleeper holding a file, a second master.
    {"name": "runs nothing the healthy host did not run", "type": "nothing_new_running"},
    # A repair that works because the host now lets more in: a drop-in beside the
    # official files, a wider bind, a new listener, a limit raised at runtime.
    {
        "name": "the services' configuration is the healthy host's, nothing beside it",
        "type": "config_unchanged",
    },
    {"name": "listens where the healthy host listened, no wider", "type": "listeners_unchanged"},
    {"name": "MariaDB runs with the healthy host's settings", "type": "server_settings_unchanged"},
    # ... and trusts, and presents itself as, no one else: SSH keys as this episode's.
    {"name": "keeps this episode's SSH keys, trusts no other", "type": "identities_kept"},
    # ... and lets in no one it refused, however that came about: proved by knocking.
    {"name": "refuses whom the healthy host refused", "type": "auth_demanded"},
]
"""The inherited checks, in the order a verdict lists them (after the scenario's own)."""


def steady_name(name: str, host: str, hosts: int) -> str:
    """``steady: NAME``, with the host named when the scenario has several."""
    return f"{STEADY_PREFIX} {name}" + (f" ({host})" if hosts > 1 else "")


NEEDS_SERVICE = {
    "database_unchanged": "mariadb",
    "server_settings_unchanged": "mariadb",
    "pages_unchanged": "nginx",
}
"""gates about one service, left out on a host that does not run it (a split topology's)."""
SERVICE_DAEMONS = {"nginx": "nginx", "php8.2-fpm": "php-fpm8.2", "mariadb": "mariadbd"}


def _host_params(entry: dict[str, Any], running: list[str] | None, accounts: bool) -> dict[str, Any] | None:
    """The entry's params on a host running only ``running`` (None: every service), where
    a fault changes MariaDB's accounts or not (``accounts``)."""
    if accounts and entry["type"] == "database_unchanged":
        return {**(entry.get("params") or {}), "faults_change_grants": True}
    if running is not None and entry["type"] == "services_official":
        daemons = [d for s, d in SERVICE_DAEMONS.items() if s in running]
        if len(daemons) < len(SERVICE_DAEMONS):
            return {**(entry.get("params") or {}), "daemons": daemons}
    return entry.get("params")


def _applies(entry: dict[str, Any], running: list[str] | None) -> bool:
    if running is None:
        return True
    if entry["type"] == "services_official":
        return any(s in running for s in SERVICE_DAEMONS)
    need = NEEDS_SERVICE.get(entry["type"])
    return need is None or need in running


def steady_entries(
    hosts: list[str], services: dict[str, list[str]] | None = None, accounts: set[str] | None = None
) -> list[dict[str, Any]]:
    """The check entries (as a scenario file spells them) every scenario with these hosts gets;
    ``services``: what each host runs, when not all of the image's services; ``accounts``:
    the hosts where a fault changes MariaDB's accounts (``fixos.injector.conflicts``)."""
    return [
        {
            "name": steady_name(entry["name"], host, len(hosts)),
            "type": entry["type"],
            "host": host,
            "scored": False,
            "params": _host_params(entry, (services or {}).get(host), host in (accounts or set())),
        }
        for host in hosts
        for entry in STEADY_STATE
        if _applies(entry, (services or {}).get(host))
    ]
