"""Recipes of the faults between hosts and clients: firewalls, addresses, links, certificates."""

from __future__ import annotations

from .base import Need, Recipe

TLS = Need(
    "the site's certificate is the healthy one",
    "tls_valid",
    {"name": "shop.tidewater.test", "path": "/"},
    on="web",
    needs=("nginx",),
    reads=("/",),
)
RECIPES: tuple[Recipe, ...] = (
    Recipe(
        "db_bind_local",
        ("db",),
        "the order status page cannot reach the database since it was restarted",
        "config_error",
        "service:mariadb",
        lambda rng: {},
        (
            Need(
                "the app host reaches MariaDB on db", "db_reachable", on="app", needs_on=(("db", "mariadb"),)
            ),
        ),
        ("/status",),
        weight=2,
        # its fix restarts MariaDB: a batch job holding every connection floods it before the
        # init script's ping answers, and the script reports failure (gen:5:37, third 200-run)
        excludes=(("connections_exhausted", "its restart is flooded by the batch job (gen:5:37)"),),
    ),
    Recipe(
        "db_host_wrong",
        ("app",),
        "the order status page cannot find the database",
        "dependency",
        "host:db",
        lambda rng: {"variants": ["hosts", "app_ini"]},
        (),
        ("/status",),
        weight=2,
        breaks=("db_reachable",),
    ),
    Recipe(
        "link_throttled",
        ("db",),
        "the order status page has become very slow",
        "network_policy",
        "link:eth0",
        lambda rng: {},
        (Need("db's traffic is not shaped", "qdisc_unchanged"),),
        ("/status",),
        caps=("NET_ADMIN",),
        weight=3,
    ),
    Recipe(
        "tls_expired",
        ("all", "web"),
        "browsers warn that the site's certificate has expired",
        "certificate",
        "file:/etc/nginx/tls",
        lambda rng: {},
        (TLS,),
        reloads=("nginx",),
        weight=2,
    ),
    Recipe(
        "tls_wrong_name",
        ("all", "web"),
        "browsers warn that the site's certificate is for another name",
        "certificate",
        "file:/etc/nginx/tls",
        lambda rng: {},
        (TLS,),
        reloads=("nginx",),
        weight=2,
    ),
)
