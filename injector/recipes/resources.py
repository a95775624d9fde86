"""Recipes of the faults that use something up or come back: disks, memory, CPU, ports, connections."""

from __future__ import annotations

from .base import ANY, THREADS, Need, Recipe, pid, running

ROTATION = (
    Need("logrotate rotates the access log", "logrotate_rotates", {"log": "/var/log/nginx/shop.access.log"}),
    Need("the access log is rotated", "log_rotated", {"log": "/var/log/nginx/shop.access.log", "max_mb": 4}),
)

# a fault whose inject restarts php-fpm cannot be composed with one that keeps php-fpm from
# starting again (gen:5:16, 5:18 of the second 200-world run)
RESTARTS_PHP_FPM = tuple(
    (key, "its inject restarts php-fpm, which a full /var/log or memory hog kept down (gen:5:16, 5:18)")
    for key in ("disk_fill:/var/log", "inodes_exhausted:/var/log", "deleted_open_file:/var/log", "memory_hog")
)

RECIPES: tuple[Recipe, ...] = (
    Recipe(
        "disk_fill",
        ANY,
        "monitoring on {host}: the log filesystem /var/log is almost full",
        "resource_exhaustion",
        "fs:/var/log",
        lambda rng: {"path": "/var/log", "percent": rng.choice([96, 97, 98])},
        (Need("/var/log is at most 95% full", "disk_usage", {"path": "/var/log", "max_percent": 95}),),
    ),
    Recipe(
        "inodes_exhausted",
        ANY,
        "monitoring on {host}: no new file can be created under /var/log, though it is not full",
        "resource_exhaustion",
        "fs:/var/log",
        lambda rng: {"path": "/var/log"},
        (
            Need(
                "/var/log has inodes to spare",
                "disk_usage",
                {"path": "/var/log", "metric": "inodes", "max_percent": 90},
            ),
        ),
        weight=2,
    ),
    Recipe(
        "deleted_open_file",
        ANY,
        "monitoring on {host}: /var/log is full, yet no file there is large",
        "resource_exhaustion",
        "fs:/var/log",
        lambda rng: {"path": "/var/log", "percent": rng.choice([96, 97])},
        (Need("/var/log is at most 95% full", "disk_usage", {"path": "/var/log", "max_percent": 95}),),
        weight=3,
        culprit=True,
    ),
    Recipe(
        "memory_hog",
        ANY,
        "monitoring on {host}: memory is almost exhausted",
        "resource_exhaustion",
        "memory",
        lambda rng: {},
        (Need("nothing holds the memory", "no_memory_hog", {"max_mb": 150}),),
        weight=2,
        culprit=True,
    ),
    Recipe(
        "cpu_hog",
        ANY,
        "monitoring on {host}: the CPU is busy all the time",
        "resource_exhaustion",
        "cpu",
        lambda rng: {},  # unpinned: one pin a host (the squatter's); see base.pid
        (Need("nothing burns the CPU", "no_cpu_hog", {"max_percent": 30}),),
        culprit=True,
        excludes=(("tmp_full", "beside a full /tmp its hog never burnt: 0 % of a core (gen:2:23)"),),
    ),
    Recipe(
        "port_squatter",
        ("all", "web"),
        "the site answers with a page nobody recognises, or not at all",
        "port_conflict",
        "port:80",
        lambda rng: {"service": "nginx", "port": 80, "pid": pid(rng)},
        running("nginx", 80, "nginx"),
        ("/", "/status"),
        starts=("nginx",),
        weight=3,
        culprit=True,
        # port 80 held by the squatter after the faults: a partial repair that kills it while
        # another fault keeps nginx down leaves 80 gone, which the listeners gate fails
        excludes=tuple(
            (key, "another fault keeping nginx down: the partial repair lost port 80 (gen:4:8, gen:4:21)")
            for key in ("config_broken:nginx", "service_stopped:nginx", "service_killer:nginx")
        ),
    ),
    Recipe(
        "service_killer",
        ("all", "web"),
        "the site keeps going down a few seconds after every restart",
        "scheduled_rebreaker",
        "service:nginx",
        lambda rng: {"service": "nginx"},
        running("nginx"),
        ("/",),
        hold=5.0,
        starts=("nginx",),
        weight=3,
        culprit=True,
        returns=True,
    ),
    Recipe(
        "table_crashed",
        ("all", "db"),
        "the order status page shows an error instead of the orders",
        "data_corruption",
        "table:shop.shipments",
        lambda rng: {"table": "shop.shipments"},
        (
            Need(
                "the shipments table is intact",
                "table_intact",
                {"table": "shop.shipments"},
                needs=("mariadb",),
            ),
            Need(
                "the status page counts the real orders",
                "http_page",
                {"path": "/status", "same_as_healthy": False, "contains": "orders: 10", "hold_seconds": 2.0},
                on="web",
                needs=("nginx",),
                reads=("/status",),
            ),
        ),
        weight=2,
    ),
    Recipe(
        "fd_limit",
        # only where php-fpm shares the host with the shop: on a split app host its confirmation
        # found php-fpm down after the restart (gen:5:16, 5:18 of the second 200-world run)
        ("all",),
        "the order status page fails now and then under ordinary traffic",
        "resource_exhaustion",
        "service:php8.2-fpm",
        lambda rng: {"service": "php-fpm"},
        (),
        ("/status",),
        hold=2.0,
        weight=2,
        excludes=RESTARTS_PHP_FPM,
    ),
    Recipe(
        "fd_limit",
        ("all", "web"),
        "the site fails now and then under ordinary traffic",
        "resource_exhaustion",
        "service:nginx",
        lambda rng: {"service": "nginx"},
        (),
        ("/status",),
        hold=2.0,
        weight=2,
    ),
    Recipe(
        "fpm_pool_broken",
        ("all", "app"),
        "the order status page answers with a gateway error since a tuning change",
        "config_error",
        "service:php8.2-fpm",
        lambda rng: {},
        (),
        ("/status",),
        hold=2.0,
        weight=2,
        excludes=RESTARTS_PHP_FPM,
    ),
    Recipe(
        "connections_exhausted",
        ("all", "db"),
        "the order status page says the database has too many connections",
        "resource_exhaustion",
        "service:mariadb",
        lambda rng: {},
        (
            Need(
                "MariaDB has connections to spare",
                "sql_value",
                {"query": THREADS, "max": 20},
                needs=("mariadb",),
            ),
        ),
        ("/status",),
        hold=2.0,
        weight=2,
        culprit=True,
    ),
    Recipe(
        "tmp_full",
        ("all", "app"),
        "monitoring on {host}: /tmp is full, and uploads and sessions fail",
        "resource_exhaustion",
        "fs:/tmp",
        lambda rng: {},
        (Need("/tmp is at most half full", "disk_usage", {"path": "/tmp", "max_percent": 50}),),
        ("/status",),
        hold=2.0,
        host={"tmp_disk_mb": 16},
    ),
    Recipe(
        "logrotate_broken",
        ("all", "web"),
        "monitoring on {host}: the access log grows without end",
        "config_error",
        "file:/etc/logrotate.d/nginx",
        lambda rng: {"percent": 85},
        ROTATION,
        weight=2,
    ),
    Recipe(
        "cron_rebreaker",
        ("all",),
        "the order status page breaks again minutes after every fix",
        "scheduled_rebreaker",
        "cron:php-fpm",
        lambda rng: {"target": "php-fpm"},
        (Need("cron's jobs are the healthy host's", "cron_jobs_unchanged"),),
        ("/status",),
        hold=8.0,
        starts=("php8.2-fpm",),
        weight=3,
        returns=True,
    ),
    Recipe(
        "firewall_blocks",
        ("db",),
        "the order status page cannot reach the database since a hardening change",
        "network_policy",
        "firewall:INPUT",
        lambda rng: {},
        (
            Need(
                "the app host reaches MariaDB on db", "db_reachable", on="app", needs_on=(("db", "mariadb"),)
            ),
            Need(
                "the db firewall lets the app in and keeps its hardening",
                "firewall_kept",
                on="app",
                needs_on=(("db", "mariadb"),),
            ),
        ),
        ("/status",),
        caps=("NET_ADMIN",),
        weight=2,
    ),
)
