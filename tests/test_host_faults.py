"""Host faults (fd_limit, fpm_pool_broken) on real containers: the symptom is real from
outside (the page fails through the published port, the daemon's own log says why),
a lazy repair that only starts a private daemon by hand scores 0, the oracle 1.0."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import docker
import pytest
from helpers import booted, removed_run, wait_for

from fixos.episodes.episode import run_episode
from fixos.injector import FAULTS
from fixos.injector.base import fault_rng
from fixos.scenarios.catalog import load_catalog
from fixos.stack.hosts import LiveHost
from fixos.stack.leftovers import remove_labelled
from fixos.stack.pool import HostPool

pytestmark = pytest.mark.live

NGINX_LOG = "/var/log/nginx/shop.error.log"
FPM_LOG = "/var/log/php8.2-fpm.log"

# (fault, params, seed, the variant that seed draws, the log that says why, what it says)
SYMPTOMS = [
    (
        "fd_limit",
        {"service": "nginx"},
        1,
        "worker_connections",
        NGINX_LOG,
        "worker_connections are not enough",
    ),
    ("fd_limit", {"service": "php-fpm"}, 2, "pool_rlimit_files", NGINX_LOG, "(Too many open files)"),
    ("fd_limit", {"service": "php-fpm"}, 3, "master_rlimit_files", FPM_LOG, "Too many open files (24)"),
    ("fpm_pool_broken", {}, 3, "unknown_user", FPM_LOG, "cannot get uid for user 'webapp'"),
    ("fpm_pool_broken", {}, 2, "socket_owner", NGINX_LOG, "(13: Permission denied)"),
    ("fpm_pool_broken", {}, 21, "listen_elsewhere", NGINX_LOG, "(2: No such file or directory)"),
    ("fpm_pool_broken", {}, 16, "limit_extensions", NGINX_LOG, "see security.limit_extensions"),
]


@pytest.fixture(scope="module")
def host(client: docker.DockerClient, images: dict[str, str]) -> Iterator[LiveHost]:
    with (
        removed_run(client, f"test-hostf-{secrets.token_hex(4)}") as run_id,
        booted(client, images, run_id) as web,
    ):
        yield web


@pytest.mark.parametrize(
    ("fault_type", "params", "seed", "variant", "log", "says"),
    SYMPTOMS,
    ids=[f"{s[0]}-{s[3]}" for s in SYMPTOMS],
)
def test_symptom_is_real_from_outside(host: LiveHost, fault_type, params, seed, variant, log, says):
    cls = FAULTS.get(fault_type)
    fault = cls(cls.Params.model_validate(params))
    with host.shell() as shell:
        shell.run(f": > {NGINX_LOG}; : > {FPM_LOG}")  # no earlier case's lines
        rng = fault_rng(seed, 0, fault_type)
        fault.prepare(shell, rng)
        seeded = fault.inject(shell, rng)
        try:
            assert seeded["variant"] == variant
            assert fault.confirm(shell).passed
            # From outside, through the published port: the PHP page fails, the static one does not.
            assert host.http_get(80, "/status").status not in (0, 200)
            assert host.http_get(80, "/").status == 200
            # The daemon's own log says why (/var/log is a tmpfs: the engine's archive API does not see it).
            text = shell.run(f"cat {log}").output
            assert says in text, text[-600:]
        finally:
            fault.revert(shell)
        wait_for(lambda: host.http_get(80, "/status").status == 200, timeout=15)


# Private daemons started by hand from fixed copies: the page works until the services
# are restarted by their init scripts, which bring back the broken configuration.
PRIVATE_PHP_FPM = """\
mkdir -p /root/fpm
sed -e '/^rlimit_files/d' -e 's#^include=.*#include=/root/fpm/www.conf#' \
  /etc/php/8.2/fpm/php-fpm.conf > /root/fpm/php-fpm.conf
sed -e '/^rlimit_files/d' /etc/php/8.2/fpm/pool.d/www.conf > /root/fpm/www.conf
service php8.2-fpm stop
php-fpm8.2 -y /root/fpm/php-fpm.conf
"""
PRIVATE_NGINX = """\
sed -E 's/worker_connections [0-9]+;/worker_connections 768;/' /etc/nginx/nginx.conf > /etc/nginx/private.conf
service nginx stop
nginx -c /etc/nginx/private.conf
"""
EPISODES = [
    ("fd_1", 3, "oracle", None, 1.0),
    ("fd_1", 2, "oracle", PRIVATE_PHP_FPM, 0.0),
    ("fd_2", 1, "oracle", PRIVATE_NGINX, 0.0),
]


@pytest.fixture(scope="module")
def episodes(client: docker.DockerClient, images: dict[str, str]) -> Iterator[list]:
    catalog = load_catalog()
    run_id = f"test-hostf-ep-{secrets.token_hex(4)}"
    pool = HostPool(client, images, run_id=run_id, size=3, planned=[catalog[e[0]].hosts for e in EPISODES])

    def one(case: tuple) -> object:
        sid, seed, agent, script, _ = case
        scenario = catalog[sid]
        if script is not None:
            scenario = scenario.model_copy(update={"solution": script})
        record, _ = run_episode(scenario, seed, agent, client=client, images=images, run_id=run_id, pool=pool)
        return record

    try:
        with ThreadPoolExecutor(max_workers=3) as workers:
            yield list(workers.map(one, EPISODES))
    finally:
        pool.close()
        remove_labelled(client, run_id=run_id)


@pytest.mark.parametrize(
    "index",
    range(len(EPISODES)),
    ids=[f"{e[0]}-{'oracle' if e[3] is None else 'private-daemon'}" for e in EPISODES],
)
def test_repairs_scored(episodes: list, index: int):
    record, expected = episodes[index], EPISODES[index][4]
    assert record.status == "scored", record.error
    failed = [f"{c.name}: {c.detail}" for c in record.verdict.checks if not c.passed]
    assert record.reward == expected, failed
    if expected == 0.0:
        # The page works as the agent left it; the daemon started by hand from a private
        # configuration gives itself away as left, a final 0.0 (no restarts needed).
        official = next(f for f in failed if f.startswith("steady: services run as their init scripts"))
        assert "started as" in official and ("/root/fpm/" in official or "private.conf" in official), official
