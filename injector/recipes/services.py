"""Recipes of the faults that keep a service from serving: stopped, misconfigured, locked out."""

from __future__ import annotations

from .base import Need, Recipe, running

RECIPES: tuple[Recipe, ...] = (
    Recipe(
        "service_stopped",
        ("all", "web"),
        "the site does not answer at all",
        "service_stopped",
        "service:nginx",
        lambda rng: {"service": "nginx"},
        running("nginx", 80, "nginx"),
        ("/", "/status"),
        starts=("nginx",),
    ),
    Recipe(
        "service_stopped",
        ("all", "db"),
        "the order status page fails with an error",
        "service_stopped",
        "service:mariadb",
        lambda rng: {"service": "mariadb"},
        running("mariadb", 3306, "mariadbd"),
        ("/status",),
        starts=("mariadb",),
    ),
    Recipe(
        "service_stopped",
        ("all", "app"),
        "the order status page answers with a gateway error",
        "service_stopped",
        "service:php8.2-fpm",
        lambda rng: {"service": "php8.2-fpm"},
        running("php8.2-fpm"),
        ("/status",),
        starts=("php8.2-fpm",),
    ),
    Recipe(
        "config_broken",
        ("all", "web"),
        "the site went down after a configuration change and stayed down",
        "config_error",
        "service:nginx",
        lambda rng: {"service": "nginx"},
        running("nginx", 80, "nginx"),
        ("/", "/status"),
        starts=("nginx",),
        weight=2,
    ),
    Recipe(
        "config_broken",
        ("all", "db"),
        "the database was restarted after a configuration change and did not come back",
        "config_error",
        "service:mariadb",
        lambda rng: {"service": "mariadb"},
        running("mariadb", 3306, "mariadbd"),
        ("/status",),
        starts=("mariadb",),
        weight=2,
    ),
    Recipe(
        "permissions_broken",
        ("all", "web"),
        "the home page answers that access is forbidden",
        "permission",
        "file:/var/www/shop",
        lambda rng: {"target": "web_root"},
        (),
        ("/",),
        weight=2,
    ),
    Recipe(
        "permissions_broken",
        ("all", "db"),
        "the database will not start since a maintenance job ran",
        "permission",
        "file:/var/lib/mysql",
        lambda rng: {"target": "datadir"},
        (
            *running("mariadb", 3306, "mariadbd"),
            Need(
                "MariaDB's data belongs to mysql",
                "path_permissions",
                {
                    "owner": "mysql",
                    "paths": ["/var/lib/mysql", "/var/lib/mysql/shop", "/var/lib/mysql/ibdata1"],
                },
            ),
        ),
        ("/status",),
        starts=("mariadb",),
        weight=2,
        excludes=(
            (
                "service_stopped:mariadb",
                "with the server stopped before the chown, InnoDB refused to start after the fix (gen:2:38)",
            ),
        ),
    ),
)
