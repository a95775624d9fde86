"""Fault families: which kind of trouble each fault type is, so that a bench can
say which kinds of incident an agent repairs (the baseline's rules reach some
families and not others).

A type missing from the table falls under its own name (``family_of``), so a
new type still gets a row of its own in a report; tests/test_families.py fails
until the new type is given its family here.
"""

from __future__ import annotations

from collections.abc import Iterable

FAMILIES: dict[str, str] = {
    "service_stopped": "service",
    "config_broken": "config",
    "fpm_pool_broken": "config",
    "cpu_hog": "process",
    "memory_hog": "process",
    "port_squatter": "process",
    "service_killer": "process",
    "disk_fill": "disk",
    "inodes_exhausted": "disk",
    "deleted_open_file": "disk",
    "connections_exhausted": "database",
    "permissions_broken": "permissions",
    "dependency_broken": "dependency",
    "tls_expired": "tls",
    "tls_wrong_name": "tls",
    "tls_key_mismatch": "tls",
    "fd_limit": "host",
    "table_crashed": "database",
    "cron_rebreaker": "host",
    "firewall_blocks": "network",
    "db_bind_local": "network",
    "db_host_wrong": "network",
    "link_throttled": "network",
    "tmp_full": "host",
    "logrotate_broken": "host",
}
"""fault type -> family: service, config, process, disk, database, permissions,
dependency, network, tls, host."""


def family_of(fault_type: str) -> str:
    """The family of ``fault_type``; a type the table does not know is its own family."""
    return FAMILIES.get(fault_type, fault_type)


def families_of(fault_types: Iterable[str]) -> list[str]:
    """The families an episode with these faults belongs to, sorted, each once."""
    return sorted({family_of(t) for t in fault_types})
