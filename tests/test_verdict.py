"""Reward arithmetic and checks that need no container (fake outside access)."""

from __future__ import annotations

import hashlib
import time
from typing import Any

from fixos.core.models import CheckResult, HttpResponse, Outcome
from fixos.core.registry import Registry
from fixos.shells import FakeShell
from fixos.verifier import Check, Probe
from fixos.verifier.base import CheckParams
from fixos.verifier.files import FileUnchanged
from fixos.verifier.http import HttpPage
from fixos.verifier.system import NoCpuHog
from fixos.verifier.verify import CheckEntry, reward_of, snapshot, verify


def result(passed: bool, scored: bool = True, weight: float = 1.0) -> CheckResult:
    return CheckResult("c", "t", passed, scored, weight, "")


def test_reward_is_weighted_share_of_scored_checks():
    assert reward_of([result(True), result(False), result(True, weight=2)]) == 0.75
    assert reward_of([result(True), result(True)]) == 1.0
    assert reward_of([result(False), result(False)]) == 0.0


def test_failing_gate_zeroes_the_reward():
    assert reward_of([result(True), result(True), result(False, scored=False)]) == 0.0
    assert reward_of([result(True), result(True, scored=False)]) == 1.0


class FakeAccess:
    name = "web"

    def __init__(self) -> None:
        self.pages: dict[str, HttpResponse] = {}
        self.files: dict[str, bytes] = {}

    def http_get(self, port: int, path: str, timeout: float = 5.0) -> HttpResponse:
        return self.pages.get(path, HttpResponse(0, b"", "ConnectionRefusedError"))

    def read_file(self, path: str) -> bytes | None:
        return self.files.get(path)


def probe(access: FakeAccess) -> Probe:
    return Probe(host=None, shell=FakeShell(lambda c: ""), access=access)  # type: ignore[arg-type]


def test_http_page_wants_the_healthy_body():
    access = FakeAccess()
    access.pages["/"] = HttpResponse(200, b"<h1>Tidewater</h1>")
    check = HttpPage(HttpPage.Params(path="/"))
    baseline = check.snapshot(probe(access))
    assert baseline == hashlib.sha256(b"<h1>Tidewater</h1>").hexdigest()
    assert check.evaluate(probe(access), baseline).passed

    access.pages["/"] = HttpResponse(200, b"<h1>It works</h1>")
    outcome = check.evaluate(probe(access), baseline)
    assert not outcome.passed and "not the page" in outcome.detail

    access.pages["/"] = HttpResponse(502, b"bad gateway")
    assert "expected status 200" in check.evaluate(probe(access), baseline).detail

    del access.pages["/"]
    assert "no answer" in check.evaluate(probe(access), baseline).detail


class FallingSite(FakeAccess):
    """A page that answers once, then is gone (a killer took the server down)."""

    def http_get(self, port: int, path: str, timeout: float = 5.0) -> HttpResponse:
        page = super().http_get(port, path, timeout)
        self.pages.pop(path, None)
        return page


def test_a_page_that_must_stay_up_is_held_in_the_last_judgement_only():
    check = HttpPage(HttpPage.Params(path="/", same_as_healthy=False, hold_seconds=0.05))
    site = FallingSite()
    site.pages["/"] = HttpResponse(200, b"up")
    last = probe(site)
    outcome = check.evaluate(last, None)
    assert not outcome.passed and outcome.detail.startswith("up, then 0.05s later: "), outcome.detail
    site.pages["/"] = HttpResponse(200, b"up")
    as_left = probe(site)
    as_left.holding = False  # the final verdict's first judgement: up now is enough there
    outcome = check.evaluate(as_left, None)
    assert outcome.passed and "later" not in outcome.detail, outcome.detail
    assert "/" not in site.pages  # asked once only


def test_file_unchanged_names_the_changed_file():
    access = FakeAccess()
    access.files = {"/etc/a": b"one", "/etc/b": b"two"}
    check = FileUnchanged(FileUnchanged.Params(paths=["/etc/a", "/etc/b"]))
    baseline = check.snapshot(probe(access))
    assert check.evaluate(probe(access), baseline).passed
    access.files["/etc/b"] = b"stub"
    outcome = check.evaluate(probe(access), baseline)
    assert not outcome.passed and outcome.detail.endswith("/etc/b")
    del access.files["/etc/a"]
    assert "/etc/a" in check.evaluate(probe(access), baseline).detail


class Exploding(Check):
    type = "exploding"

    def evaluate(self, probe: Probe, baseline: object) -> Outcome:
        raise RuntimeError("boom")


def test_a_raising_check_fails_alone():
    registry: Registry[Check] = Registry("check type", [HttpPage])
    registry.register(Exploding)
    access = FakeAccess()
    access.pages["/"] = HttpResponse(200, b"ok")
    entries = [
        CheckEntry("page", "http_page", "web", True, 1.0, HttpPage.Params()),
        CheckEntry("explodes", "exploding", "web", True, 1.0, Exploding.Params()),
    ]
    probes = {"web": probe(access)}
    verdict = verify(entries, probes, snapshot(entries, probes, registry=registry), registry=registry)
    assert verdict.reward == 0.5
    assert "RuntimeError: boom" in verdict.checks[1].detail
    assert verdict.reward_json()["checks"][0] == {
        "name": "page",
        "passed": True,
        "scored": True,
        "detail": verdict.checks[0].detail,
    }


def test_token_compare_ignores_layout_and_comments_but_not_content():
    access = FakeAccess()
    access.files = {"/etc/site": b"server {\n    root /var/www;  # docroot\n}\n"}
    check = FileUnchanged(FileUnchanged.Params(paths=["/etc/site"], compare="tokens"))
    healthy = check.snapshot(probe(access))
    access.files["/etc/site"] = b"# tidied\nserver {\n\troot   /var/www;\n}"
    assert check.evaluate(probe(access), healthy).passed
    access.files["/etc/site"] = b"server { root /tmp; }"
    assert not check.evaluate(probe(access), healthy).passed


def test_a_file_left_as_the_fault_left_it_passes_the_gate():
    access = FakeAccess()
    access.files = {"/etc/site": b"root /var/www;"}
    check = FileUnchanged(FileUnchanged.Params(paths=["/etc/site"]))
    baseline = check.snapshot(probe(access))
    access.files["/etc/site"] = b"root /var/www"  # what the fault did
    baseline = check.refine(probe(access), baseline)
    assert check.evaluate(probe(access), baseline).passed
    access.files["/etc/site"] = b"root /srv/stub;"
    assert not check.evaluate(probe(access), baseline).passed


class Waiting(Check):
    """Waits like a check on the engine or on a hold period, then names itself."""

    type = "waiting"

    class Params(CheckParams):
        seconds: float
        label: str

    def evaluate(self, probe: Probe, baseline: object) -> Outcome:
        time.sleep(self.params.seconds)
        return Outcome(True, self.params.label)


def test_checks_wait_side_by_side_and_keep_their_order():
    registry: Registry[Check] = Registry("check type", [Waiting])
    entries = [
        CheckEntry(f"c{i}", "waiting", "web", True, 1.0, Waiting.Params(seconds=0.8 - 0.2 * i, label=f"c{i}"))
        for i in range(4)
    ]
    started = time.monotonic()
    verdict = verify(entries, {"web": probe(FakeAccess())}, {}, registry=registry)
    took = time.monotonic() - started
    assert [c.detail for c in verdict.checks] == ["c0", "c1", "c2", "c3"]
    assert took < 1.6, took  # side by side: 0.8 s; one after another: 2.0 s


class Timed(Waiting):
    """Waits, and records when it started and ended."""

    type = "timed"
    spans: dict[str, tuple[float, float]] = {}

    def evaluate(self, probe: Probe, baseline: object) -> Outcome:
        started = time.monotonic()
        outcome = super().evaluate(probe, baseline)
        self.spans[self.params.label] = (started, time.monotonic())
        return outcome


class TimedAlone(Timed):
    type = "alone"
    alone = True


def test_a_check_that_needs_the_host_alone_runs_before_the_others():
    registry: Registry[Check] = Registry("check type", [Timed, TimedAlone])
    Timed.spans = {}
    entries = [
        CheckEntry("a", "timed", "web", True, 1.0, Timed.Params(seconds=0.2, label="a")),
        CheckEntry("cpu", "alone", "web", True, 1.0, Timed.Params(seconds=0.2, label="cpu")),
        CheckEntry("b", "timed", "web", True, 1.0, Timed.Params(seconds=0.2, label="b")),
    ]
    verdict = verify(entries, {"web": probe(FakeAccess())}, {}, registry=registry)
    assert [c.detail for c in verdict.checks] == ["a", "cpu", "b"]
    spans = Timed.spans
    assert spans["cpu"][1] <= min(spans["a"][0], spans["b"][0]), spans
    assert abs(spans["a"][0] - spans["b"][0]) < 0.15, "the others still run side by side"


def test_the_final_verdict_counts_only_what_is_busy_in_two_samples():
    samples = iter(["1346 php-fpm8.2 182\n270 sh 100\n", "270 sh 99\n", "1346 php-fpm8.2 40\n"])
    shell = FakeShell(lambda command: next(samples))
    check = NoCpuHog(NoCpuHog.Params())
    final = check.evaluate(Probe(host=None, shell=shell, access=FakeAccess()), None)  # type: ignore[arg-type]
    assert not final.passed and final.detail == "busy: sh (PID 270) at 99%"
    assert len(shell.commands) == 2
    running = check.evaluate(Probe(None, shell, FakeAccess(), patient=False), None)  # type: ignore[arg-type]
    assert running.detail == "busy: php-fpm8.2 (PID 1346) at 40%", "one sample while the agent works"
    quiet = iter(["1346 php-fpm8.2 182\n", "1346 php-fpm8.2 3\n"])
    calm = FakeShell(lambda command: next(quiet))
    assert check.evaluate(Probe(None, calm, FakeAccess()), None).passed  # type: ignore[arg-type]


class SlowSite:
    """A real HTTP server on loopback whose first ``slow`` answers take ``delay`` s."""

    def __init__(self, slow: int, delay: float, tls: Any = None) -> None:
        """``tls``: (certificate file, key file) to serve HTTPS with instead."""
        import http.server
        import ssl
        import threading

        site = self
        self.asked = 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.asked += 1
                if site.asked <= slow:
                    time.sleep(delay)
                body = b"<h1>Tidewater</h1>"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.name = "web"

    def http_get(self, port: int, path: str, timeout: float = 5.0) -> HttpResponse:
        from fixos.stack.tunnel import http_get

        return http_get(self.server.server_address[:2], path, timeout)  # type: ignore[arg-type]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_slow_page_is_asked_again_in_a_final_verdict_only():
    """A page held past 5 s by a loaded machine passes once it answers on the second,
    longer ask; a quick look (progress) does not wait, and refused is not asked again."""
    from fixos.verifier.http import FIRST_WAIT

    check = HttpPage(HttpPage.Params(path="/", same_as_healthy=False))
    site = SlowSite(slow=1, delay=FIRST_WAIT + 1)
    try:
        outcome = check.evaluate(probe(site), None)  # type: ignore[arg-type]
        assert outcome.passed and "answered when asked again" in outcome.detail, outcome.detail
        assert site.asked == 2
        site.asked = 0
        quick = Probe(host=None, shell=FakeShell(lambda c: ""), access=site, patient=False)  # type: ignore[arg-type]
        outcome = check.evaluate(quick, None)
        assert not outcome.passed and "TimeoutError" in outcome.detail and site.asked == 1
    finally:
        site.close()

    refused = FakeAccess()
    asked = []
    refused.http_get = lambda port, path, timeout=5.0: (
        asked.append(timeout)
        or HttpResponse(  # type: ignore[method-assign]
            0, b"", "ConnectionRefusedError"
        )
    )
    assert not check.evaluate(probe(refused), None).passed
    assert asked == [FIRST_WAIT]


def test_a_slow_https_page_is_asked_again_in_a_final_verdict_only(tmp_path):
    """tls_valid is as patient as http_page: a 6 s answer passes on the second ask."""
    from fixos.stack.tls import SITE_NAME, TLS_DIR, EpisodeCA, SiteTls, site_files
    from fixos.verifier.tls import TlsValid

    ca = EpisodeCA("slow")
    files, _ = site_files(ca)
    for name in ("shop.crt", "shop.key"):
        (tmp_path / name).write_bytes(files[f"{TLS_DIR}/{name}"][0])
    site = SlowSite(slow=1, delay=6.0, tls=(tmp_path / "shop.crt", tmp_path / "shop.key"))
    site.tls = SiteTls(SITE_NAME, ca.pem(), site.server.server_address[:2], "")  # type: ignore[attr-defined]
    check = TlsValid(TlsValid.Params(same_as_healthy=False))
    baseline = {"ca": ca.pem(), "page": None}
    try:
        outcome = check.evaluate(probe(site), baseline)  # type: ignore[arg-type]
        assert outcome.passed and site.asked == 2, outcome.detail
        site.asked = 0
        quick = Probe(host=None, shell=FakeShell(lambda c: ""), access=site, patient=False)  # type: ignore[arg-type]
        outcome = check.evaluate(quick, baseline)
        assert not outcome.passed and "no answer" in outcome.detail and site.asked == 1, outcome.detail
    finally:
        site.close()


def test_a_certificate_reloaded_a_moment_late_is_trusted_when_asked_again(tmp_path):
    """`service nginx reload` returns before nginx serves the new certificate: a final
    verdict asks a rejected certificate once more a moment later (and says so); one that
    stays wrong fails, naming the rejection; the running score does not wait."""
    import threading

    from fixos.stack.tls import SITE_NAME, TLS_DIR, EpisodeCA, SiteTls, site_files
    from fixos.verifier.tls import TlsValid

    trusted, other = EpisodeCA("trusted"), EpisodeCA("other")
    for name, ca in (("good", trusted), ("bad", other)):
        files, _ = site_files(ca)
        for part in ("shop.crt", "shop.key"):
            (tmp_path / f"{name}-{part}").write_bytes(files[f"{TLS_DIR}/{part}"][0])
    good, bad = [(tmp_path / f"{n}-shop.crt", tmp_path / f"{n}-shop.key") for n in ("good", "bad")]
    site = SlowSite(slow=0, delay=0.0, tls=bad)
    site.tls = SiteTls(SITE_NAME, trusted.pem(), site.server.server_address[:2], "")  # type: ignore[attr-defined]
    context = site.server.socket.context  # type: ignore[attr-defined]
    check = TlsValid(TlsValid.Params(same_as_healthy=False))
    baseline = {"ca": trusted.pem(), "page": None}
    try:
        threading.Timer(0.3, lambda: context.load_cert_chain(*good)).start()  # the reload, late
        outcome = check.evaluate(probe(site), baseline)  # type: ignore[arg-type]
        assert outcome.passed and "rejected when first asked" in outcome.detail, outcome.detail
        context.load_cert_chain(*bad)  # a certificate that stays wrong
        outcome = check.evaluate(probe(site), baseline)  # type: ignore[arg-type]
        assert not outcome.passed and "certificate rejected" in outcome.detail, outcome.detail
        threading.Timer(0.3, lambda: context.load_cert_chain(*good)).start()
        quick = Probe(host=None, shell=FakeShell(lambda c: ""), access=site, patient=False)  # type: ignore[arg-type]
        outcome = check.evaluate(quick, baseline)
        assert not outcome.passed and "certificate rejected" in outcome.detail, outcome.detail
    finally:
        site.close()


class FailingGate(Waiting):
    """A gate that fails after ``seconds``."""

    type = "failing_gate"

    def evaluate(self, probe: Probe, baseline: object) -> Outcome:
        time.sleep(self.params.seconds)
        return Outcome(False, self.params.label)


def _page_and_failing_gate(
    gate_seconds: float, **page: Any
) -> tuple[Registry[Check], CheckEntry, CheckEntry]:
    """A scored page (not compared with the healthy one) and an unscored gate that fails
    after ``gate_seconds``, with a registry that knows both."""
    registry: Registry[Check] = Registry("check type", [HttpPage, FailingGate])
    entry = CheckEntry("page", "http_page", "web", True, 1.0, HttpPage.Params(same_as_healthy=False, **page))
    gate = CheckEntry(
        "gate", "failing_gate", "web", False, 1.0, FailingGate.Params(seconds=gate_seconds, label="x")
    )
    return registry, entry, gate


def test_a_page_that_does_not_answer_is_not_waited_for_once_a_gate_has_failed(monkeypatch):
    """A do-nothing agent's final verdict (net_5: a throttled link, the gates failing) waited
    15 s for a page whose answer could not raise a reward of 0.0; the gate ends the wait."""
    from fixos.verifier import http

    monkeypatch.setattr(http, "FIRST_WAIT", 2.0)
    monkeypatch.setattr(http, "SECOND_WAIT", 1.0)
    registry, page, gate = _page_and_failing_gate(0.3)
    hanging = SlowSite(slow=5, delay=5)
    try:
        started = time.monotonic()
        verdict = verify([page, gate], {"web": probe(hanging)}, {}, registry=registry)  # type: ignore[arg-type]
        took = time.monotonic() - started
        assert verdict.reward == 0.0 and took < 1.6, took  # the gate fails at 0.3 s; waited for: 3 s
        [seen] = [c for c in verdict.checks if c.name == "page"]
        assert not seen.passed and "not waited for: a gate failed" in seen.detail, seen.detail
        # with the gate passing, the same page is waited for (patient: asked twice)
        ok = CheckEntry("gate", "waiting", "web", False, 1.0, Waiting.Params(seconds=0.0, label="ok"))
        registry.register(Waiting)
        hanging.asked = 0
        started = time.monotonic()
        verdict = verify([page, ok], {"web": probe(hanging)}, {}, registry=registry)  # type: ignore[arg-type]
        assert time.monotonic() - started > 2.9 and hanging.asked == 2  # 2.0 s, then 1.0 s
    finally:
        hanging.close()


def test_a_hold_period_ends_when_a_gate_has_failed():
    registry, page, gate = _page_and_failing_gate(0.2, hold_seconds=30)
    access = FakeAccess()
    access.pages["/"] = HttpResponse(200, b"up")
    started = time.monotonic()
    verdict = verify([page, gate], {"web": probe(access)}, {}, registry=registry)
    assert verdict.reward == 0.0 and time.monotonic() - started < 2.0
    [seen] = [c for c in verdict.checks if c.name == "page"]
    assert "not held: a gate failed" in seen.detail, seen.detail


def test_the_broken_proof_waits_for_every_page_though_a_gate_failed(monkeypatch):
    """At the broken moment a page cut short would read as a failing scored check and could
    hide faults that break nothing the score sees: no wait is ended there."""
    from fixos.verifier import http, judge

    monkeypatch.setattr(http, "FIRST_WAIT", 2.0)
    registry, page, gate = _page_and_failing_gate(0.0)
    slow = SlowSite(slow=1, delay=0.3)
    try:
        quick = Probe(host=None, shell=FakeShell(lambda c: ""), access=slow, patient=False)  # type: ignore[arg-type]
        broken = judge(
            [page, gate], {"web": quick}, {"page": None, "gate": None}, moment="broken", registry=registry
        )
        [seen] = [c for c in broken.verdict.checks if c.name == "page"]
        assert seen.passed, seen.detail  # answered in 0.3 s, waited for
    finally:
        slow.close()


def test_a_judgement_that_does_not_settle_waits_for_every_page_though_a_gate_failed(monkeypatch):
    """A report-only level compares every check with the confirmation, gates failing as found
    among them: a page cut short there would read as broken since (``tasks.gates_settle``)."""
    from fixos.verifier import http, judge

    monkeypatch.setattr(http, "FIRST_WAIT", 1.0)
    registry, page, gate = _page_and_failing_gate(0.0)
    slow = SlowSite(slow=1, delay=0.3)
    try:
        looked = Probe(host=None, shell=FakeShell(lambda c: ""), access=slow)  # type: ignore[arg-type]
        after = judge([page, gate], {"web": looked}, {}, moment="after", registry=registry, settles=False)
        [seen] = [c for c in after.verdict.checks if c.name == "page"]
        assert seen.passed and after.verdict.reward == 0.0, seen.detail
        slow.asked = 0
        cut = judge([page, gate], {"web": looked}, {}, moment="after", registry=registry)
        [seen] = [c for c in cut.verdict.checks if c.name == "page"]
        assert not seen.passed and "not waited for" in seen.detail, seen.detail
    finally:
        slow.close()
