"""A small run directory for the run page's tests, built from the real record models and
written as a bench writes it: solved, partial and failed episodes, an invalid one, a
diagnosis, a two-phase verdict, a hostile transcript and secrets in its output."""

from __future__ import annotations

import base64
from pathlib import Path

from fixos.core.models import CheckResult, InjectedFault, Step, Verdict
from fixos.records.failures import EpisodeStatus, Failure, FailureKind
from fixos.records.models import Diagnosed, EpisodeRecord, FileChange, HostDisk, Timings
from fixos.records.report import write_reports
from fixos.records.rundir import RunDir

RUN_ID = "20261204-120000-test"
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
SHADOW_HASH = "$6$saltsalt$" + "A" * 86
MYSQL_HASH = "*" + "0123456789ABCDEF" * 2 + "01234567"
PEM = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n"
    "-----END PRIVATE KEY-----"
)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
INSTRUCTION = "Customers say the website is down. Please fix it."


def check(name: str, passed: bool, *, scored: bool = True, detail: str = "") -> CheckResult:
    return CheckResult(name, "http", passed, scored, 1.0, detail or ("200 OK" if passed else "refused"))


def record(
    scenario: str,
    agent: str,
    reward: float | None,
    *,
    seed: int = 1,
    difficulty: str = "easy",
    verdict: Verdict | None = None,
    diagnosis: float | None = None,
    failure: Failure | None = None,
    steps: int = 2,
) -> EpisodeRecord:
    if verdict is None and reward is not None:
        verdict = Verdict(
            reward, [check("site_up", reward >= 1.0), check("nginx_config_valid", True, scored=False)]
        )
    return EpisodeRecord(
        run_id=RUN_ID,
        episode_id=f"{scenario}-s{seed}-{agent}",
        scenario=scenario,
        difficulty=difficulty,
        seed=seed,
        agent=agent,
        status=EpisodeStatus.scored if reward is not None else EpisodeStatus.invalid,
        reward=reward,
        solved=reward is not None and reward >= 1.0,
        steps=steps,
        timings=Timings(reset=2.5, boot=0.4, agent=3.25, verify=1.5, step_mean=0.031),
        faults=[InjectedFault("service_stopped", "web", {"service": "nginx"}, {"pid": 909}, "nginx: exit 3")],
        families=["service"],
        verdict=verdict,
        failure=failure,
        diagnosis=None
        if diagnosis is None
        else Diagnosed(score=diagnosis, recall=1.0, precision=0.5, source="agent"),
    )


def two_phase_verdict() -> Verdict:
    """A partial repair: the site answered as left, but not after nginx restarted."""
    as_left = [check("site_up", True), check("db_up", True), check("no_new_processes", True, scored=False)]
    after = [
        check("site_up", False, detail="connection refused on :80"),
        check("db_up", True),
        check("no_new_processes", True, scored=False),
    ]
    final = [
        CheckResult(
            "site_up",
            "http",
            False,
            True,
            1.0,
            "after the restarts: connection refused on :80",
            "after_restarts",
        ),
        check("db_up", True),
        check("no_new_processes", True, scored=False),
    ]
    return Verdict(
        0.5, final, phases={"as_left": as_left, "after_restarts": after}, restarts={"web/nginx": "started"}
    )


def transcript() -> list[Step]:
    long_output = "\n".join(f"line {i}: nginx worker process" for i in range(40))
    return [
        Step(0, "systemctl status nginx", "nginx is not running\n" + HOSTILE, 3, 0.042, 1700000000.0),
        Step(1, "ps aux", long_output, 0, 0.120, 1700000001.5),
        Step(
            2,
            "cat /etc/shadow /root/key.pem",
            f"root:{SHADOW_HASH}:19000:0:99999:7:::\n{PEM}\n",
            0,
            0.01,
            1700000003.0,
        ),
        Step(3, "mysql -e 'select authentication_string from mysql.user'", MYSQL_HASH, 0, 0.2, 1700000004.0),
    ]


def disk() -> list[HostDisk]:
    """What the oracle changed on disk: its fix of nginx's configuration, after the faults' own
    change of it, and the host's boot keys (redacted as the recording left them)."""
    conf = "/etc/nginx/sites-available/shop"
    return [
        HostDisk(
            host="web",
            files=[
                FileChange(
                    path=conf,
                    kind="changed",
                    agent=True,
                    faults=True,
                    what="text, 4 lines",
                    diff=f"--- image {conf}\n+++ left {conf}\n@@ -1,2 +1,2 @@\n server {{\n-    listen 80;\n"
                    "+    listen 80 default_server;",
                    agent_diff=f"--- confirmed {conf}\n+++ left {conf}\n@@ -1,2 +1,2 @@\n server {{\n"
                    "-    listen 8O;\n+    listen 80 default_server;",
                ),
                FileChange(
                    path="/etc/ssh/ssh_host_ed25519_key",
                    kind="added",
                    what="key material, 399 bytes (contents not shown)",
                ),
            ],
        )
    ]


def make_run(root: Path) -> RunDir:
    """The sample run under ``root``; its reports (summary, scores.svg) written as a bench ends."""
    run = RunDir(root, RUN_ID)
    records = [
        (record("easy_1", "oracle", 1.0, steps=4).model_copy(update={"disk": disk()}), transcript()),
        (record("easy_1", "baseline", 0.5, verdict=two_phase_verdict(), diagnosis=0.8), transcript()[:1]),
        (record("easy_1", "baseline", 1.0, seed=2), []),
        (
            record(
                "medium_3",
                "baseline",
                0.0,
                difficulty="medium",
                verdict=Verdict(
                    0.0, [check("site_up", True), check("database_unchanged", False, scored=False)]
                ),
            ),
            [],
        ),
        (
            record(
                "hard_2",
                "oracle",
                None,
                difficulty="hard",
                failure=Failure(
                    kind=FailureKind.boot_failed, detail="StackError: the host did not boot in 60 s"
                ),
            ),
            [],
        ),
    ]
    for rec, steps in records:
        run.write_episode(rec, steps)
    write_reports(run.path, RUN_ID, run.records())
    (run.path / "calibration.png").write_bytes(PNG)
    return run
