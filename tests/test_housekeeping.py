"""tmp_full and logrotate_broken on one real host whose /tmp is a tmpfs of its own:
the full /tmp fails the status page from outside (PHP says why) while the files
the host's programs keep there stay; every logrotate variant leaves the shop's
log unrotated by the host's *own* logrotate, the inspector's dry run says so
too, and once the configuration is restored both rotate it, its lines kept."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import docker
import pytest
from helpers import judged_host, removed_run, wait_for

from fixos.injector import FAULTS
from fixos.injector.base import fault_rng
from fixos.injector.housekeeping import ROTATE_VARIANTS, SHOP_LOG, TMP_KEPT
from fixos.scenarios.schema import HostSpec
from fixos.shells.base import Shell
from fixos.stack.hosts import LiveHost
from fixos.verifier import CHECKS, Probe

# The first seed (fault index 0) that draws each variant, found with fault_rng.
VARIANT_SEEDS = {
    "path_list": 1,
    "path_typo": 2,
    "rotate_count": 3,
    "size": 4,
    "unknown_group": 5,
    "minsize": 11,
    "no_endscript": 23,
}
# The host's own logrotate, as its nightly cron job runs it, with the shop's log last
# rotated years ago: does it rotate it now?
NIGHTLY = (
    "(umask 077; printf 'logrotate state -- version 2\\n\"%s\" 2020-1-1-0:0:0\\n' "
    f"{SHOP_LOG} > /root/lr.state); logrotate -s /root/lr.state /etc/logrotate.conf >/dev/null 2>&1; "
    f"ls {SHOP_LOG}.1 2>/dev/null"
)


@pytest.fixture(scope="module")
def host(client: docker.DockerClient, images: dict[str, str]) -> Iterator[tuple[LiveHost, Shell, Probe]]:
    spec = HostSpec(name="web", tmp_disk_mb=16)
    with (
        removed_run(client, f"test-housekeeping-{secrets.token_hex(4)}") as run_id,
        judged_host(client, images, run_id, timeout=60, spec=spec) as host,
    ):
        yield host


def _check(type_name: str, **params):
    cls = CHECKS.get(type_name)
    return cls(cls.Params.model_validate(params))


def test_every_variant_has_a_seed():
    assert set(VARIANT_SEEDS) == {v[0] for v in ROTATE_VARIANTS}
    for variant, seed in VARIANT_SEEDS.items():
        assert fault_rng(seed, 0, "logrotate_broken").choice(ROTATE_VARIANTS)[0] == variant


@pytest.mark.live
def test_tmp_full_fails_the_status_page_from_outside(host):
    web, shell, probe = host
    fault = FAULTS.get("tmp_full")(FAULTS.get("tmp_full").Params())
    room = _check("disk_usage", path="/tmp", max_percent=50)
    kept = _check("paths_exist", paths=TMP_KEPT)
    assert room.evaluate(probe, None).passed and kept.evaluate(probe, None).passed
    seeded = fault.inject(shell, fault_rng(1, 0, "tmp_full"))
    try:
        assert fault.confirm(shell).passed, fault.confirm(shell).detail
        assert web.http_get(80, "/status").status == 500
        assert web.http_get(80, "/").status == 200
        assert "No space left on device" in shell.run("tail -n 5 /var/log/nginx/shop.error.log").output
        assert not room.evaluate(probe, None).passed
        assert kept.evaluate(probe, None).passed  # the fault wrote beside them, not over them
        assert all(f.startswith("/tmp/") for f in seeded["junk"].split("\n"))
    finally:
        fault.revert(shell)
    wait_for(lambda: web.http_get(80, "/status").status == 200, timeout=15)
    assert room.evaluate(probe, None).passed
    assert not fault.confirm(shell).passed


@pytest.mark.live
@pytest.mark.parametrize("variant", list(VARIANT_SEEDS))
def test_logrotate_variant_leaves_the_log_unrotated(host, variant):
    _, shell, probe = host
    shell.run(f"rm -f {SHOP_LOG}.* && : > {SHOP_LOG}")
    fault = FAULTS.get("logrotate_broken")(FAULTS.get("logrotate_broken").Params(percent=85))
    rotates, rotated = _check("logrotate_rotates"), _check("log_rotated")
    assert rotates.evaluate(probe, None).passed
    seeded = fault.inject(shell, fault_rng(VARIANT_SEEDS[variant], 0, "logrotate_broken"))
    try:
        assert seeded["variant"] == variant
        assert fault.confirm(shell).passed, fault.confirm(shell).detail
        baseline = rotated.refine(probe, None)
        assert baseline, "the grown log has no first line"
        verdict = rotates.evaluate(probe, None)
        assert not verdict.passed, verdict.detail
        assert not shell.run(NIGHTLY).output.strip(), "the host's own logrotate rotated the log"
        assert not rotated.evaluate(probe, baseline).passed
    finally:
        fault.revert(shell)
    assert rotates.evaluate(probe, None).passed
    assert shell.run(NIGHTLY).output.strip() == f"{SHOP_LOG}.1"
    outcome = rotated.evaluate(probe, baseline)
    assert outcome.passed, outcome.detail
    shell.run(f"rm -f {SHOP_LOG}.* /root/lr.state && : > {SHOP_LOG}")
