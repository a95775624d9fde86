"""Diagnosis graded deterministically, without containers: the ground truth of every fault
type, the matching and its F-score, controls, equivalent spellings, refused reports."""

from __future__ import annotations

import json

import pytest

from fixos.core.models import InjectedFault
from fixos.diagnosis import Report, grade, parse_report, report_schema, truths
from fixos.diagnosis.report import ReportError
from fixos.diagnosis.truth import truth_report
from fixos.injector.recipes import CAUSES, RECIPES
from fixos.scenarios.catalog import load_catalog

CATALOG = load_catalog()


def _injected(scenario_id: str) -> list[InjectedFault]:
    """The faults of a scenario as an episode records them, with seeded parts of the right shape."""
    scenario = CATALOG[scenario_id]
    out = []
    for i, f in enumerate(scenario.faults):
        seeded = (
            {"pid": 900 + i, "file": f"/etc/fixos/f{i}.conf"}
            if i % 2 == 0
            else {"processes": [{"pid": 950 + i}]}
        )
        out.append(
            InjectedFault(
                f.type, scenario.host_of(f), f.params.model_dump() if f.params else {}, seeded, "ok"
            )
        )
    return out


def _report(findings: list[dict]) -> Report:
    return parse_report(json.dumps({"healthy": False, "findings": findings}))


@pytest.mark.parametrize("scenario_id", sorted(k for k, s in CATALOG.items() if s.faults))
def test_every_fault_of_the_catalogue_has_a_truth_and_the_oracles_report_scores_full(scenario_id: str):
    faults = truths(_injected(scenario_id))
    assert all(t.cause in CAUSES for t in faults)
    assert grade(parse_report(json.dumps(truth_report(faults))), faults).score == 1.0
    assert grade(None, faults).score == 0.0  # no report
    assert grade(Report(healthy=True), faults).score == 0.0  # "all is well" on a broken world
    detection = _report([{"host": faults[0].host, "component": "host:all", "cause": "config_error"}])
    assert grade(detection, faults).score == 0.0  # "something is wrong" earns nothing


def test_every_generated_world_has_a_truth():
    for level in range(1, 6):
        for n in range(1, 31):
            scenario = CATALOG[f"gen:{level}:{n}"]
            injected = [
                InjectedFault(f.type, scenario.host_of(f), f.params.model_dump(), {}, "")
                for f in scenario.faults
            ]
            assert len(truths(injected)) == len(scenario.faults)


def test_a_shotgun_report_scores_at_most_three_tenths():
    # the report is the only input: graded here on every broken world of the catalogue
    for scenario_id in sorted(k for k, s in CATALOG.items() if s.faults):
        faults = truths(_injected(scenario_id))
        hosts = sorted({h.name for h in CATALOG[scenario_id].hosts})
        components = sorted({r.component for r in RECIPES})
        shotgun = [
            {"host": h, "component": c, "cause": cause} for h in hosts for c in components for cause in CAUSES
        ][:50]
        everything = [  # every component of every host, each with the cause its recipe gives
            {"host": h, "component": r.component, "cause": r.cause} for h in hosts for r in RECIPES
        ][:50]
        for findings in (shotgun, everything):
            assert grade(_report(findings), faults).score <= 0.3, scenario_id


def test_credit_is_shared_as_the_docs_say():
    faults = truths(_injected("hard_3"))  # cpu_hog, port_squatter (pid), disk_fill, config_broken...
    squatter = next(t for t in faults if t.type == "port_squatter")
    right = {
        "host": "web",
        "component": "port:80",
        "cause": "port_conflict",
        "evidence": f"pid {squatter.identities[0]}",
    }
    assert grade(_report([right]), [squatter]).score == 1.0
    no_pid = {**right, "evidence": "something holds it"}
    assert grade(_report([no_pid]), [squatter]).score == 0.8
    wrong_cause = {**right, "cause": "config_error"}
    assert grade(_report([wrong_cause]), [squatter]).score == 0.7
    elsewhere = {**right, "host": "db"}
    assert grade(_report([elsewhere]), [squatter]).score == 0.0
    both = grade(_report([right, elsewhere]), [squatter])
    assert (both.recall, both.precision) == (1.0, 0.5) and both.score == pytest.approx(2 / 3, abs=1e-3)


def test_equivalent_spellings_and_a_pid_counts_only_as_a_word():
    stopped = InjectedFault("service_stopped", "app", {"service": "php8.2-fpm"}, {}, "")
    for spelling in ("service:php-fpm", "SERVICE:php8.2-fpm", "service:php-fpm8.2"):
        report = _report([{"host": "app", "component": spelling, "cause": "service_stopped"}])
        assert grade(report, truths([stopped])).score == 1.0, spelling
    fill = InjectedFault("disk_fill", "db", {"path": "/var/log", "percent": 97}, {}, "")
    under = _report(
        [{"host": "db", "component": "file:/var/log/junk/big.bin", "cause": "resource_exhaustion"}]
    )
    assert grade(under, truths([fill])).score == 1.0
    vaguer = _report([{"host": "db", "component": "fs:/var", "cause": "resource_exhaustion"}])
    assert grade(vaguer, truths([fill])).score == 0.0  # a parent of the place is no place
    ssh = truths([InjectedFault("service_stopped", "web", {"service": "ssh"}, {}, "")])  # no recipe draws it
    sshd = _report([{"host": "web", "component": "service:sshd", "cause": "service_stopped"}])
    assert grade(sshd, ssh).score == 1.0
    hog = truths([InjectedFault("memory_hog", "web", {}, {"pid": 91}, "")])
    near = _report(
        [{"host": "web", "component": "memory", "cause": "resource_exhaustion", "evidence": "pid 910"}]
    )
    assert grade(near, hog).score == 0.8


def test_a_control_wants_healthy_and_nothing_else():
    assert grade(Report(healthy=True), []).score == 1.0
    assert grade(None, []).score == 0.0
    assert (
        grade(_report([{"host": "web", "component": "service:nginx", "cause": "service_stopped"}]), []).score
        == 0.0
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "report: not JSON"),
        ('{"findings": []}', "report: healthy: Field required"),
        (
            '{"healthy": false, "findings": [{"host": "web", "component": "x", "cause": "gremlins"}]}',
            "report: findings.0.cause: cause 'gremlins' is none of",
        ),
        (
            '{"healthy": false, "findings": [{"component": "x", "cause": "permission"}]}',
            "report: findings.0.host",
        ),
        (
            '{"healthy": true, "findings": [{"host": "web", "component": "x", "cause": "permission"}]}',
            "report: top level: a healthy report lists no findings",
        ),
        ('{"healthy": false, "extra": 1}', "report: extra: Extra inputs are not permitted"),
    ],
)
def test_a_report_that_does_not_parse_is_one_line_naming_the_field(text: str, said: str):
    with pytest.raises(ReportError) as raised:
        parse_report(text)
    assert str(raised.value).startswith(said), str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_schema_is_published():
    schema = report_schema()
    assert schema["required"] == ["healthy"] and "findings" in schema["properties"]


def test_a_report_handed_over_as_a_file_is_graded_and_a_bad_one_scores_zero_naming_the_field(tmp_path):
    from fixos.episodes.diagnosed import REPORT_FILE, diagnosed

    faults = _injected("easy_1")
    workdir = tmp_path / "run" / "easy_1-s1-external"
    workdir.mkdir(parents=True)
    outside = type("External", (), {"wants_endpoints": True})()  # no report() of its own
    assert diagnosed(outside, workdir, faults).source == "none"
    (workdir.parent / REPORT_FILE).write_text(json.dumps(truth_report(truths(faults))))
    assert diagnosed(object(), workdir, faults).source == "none"  # only the external agent's
    graded = diagnosed(outside, workdir, faults)
    assert (graded.source, graded.score) == ("file", 1.0)
    assert not (workdir.parent / REPORT_FILE).exists() and (workdir / REPORT_FILE).is_file()  # taken once
    assert diagnosed(outside, workdir, faults).source == "none"
    (workdir.parent / REPORT_FILE).write_text('{"healthy": false, "findings": [{"host": "web"}]}')
    bad = diagnosed(outside, workdir, faults)
    assert bad.score == 0.0 and bad.error is not None and "findings.0.component" in bad.error


def test_the_shotgun_agents_own_report_scores_at_most_three_tenths_on_every_world():
    from fixos.agents.nop import ShotgunAgent

    report = parse_report(json.dumps(ShotgunAgent().report()))
    worlds = [k for k, s in CATALOG.items() if s.faults]
    worlds += [f"gen:{level}:{n}" for level in range(1, 6) for n in range(1, 21)]
    for world in worlds:
        scenario = CATALOG[world]
        if not scenario.faults:
            continue
        injected = [
            InjectedFault(f.type, scenario.host_of(f), f.params.model_dump() if f.params else {}, {}, "")
            for f in scenario.faults
        ]
        assert grade(report, truths(injected)).score <= 0.3, world


def test_handed_reports_the_last_that_parsed_counts_else_the_last_given():
    from fixos.diagnosis import Handed
    from fixos.episodes.diagnosed import graded

    faults = _injected("easy_1")
    truth = truth_report(truths(faults))
    handed = Handed()
    assert handed.text is None and graded(handed.text, "agent", faults).source == "none"
    with pytest.raises(ReportError, match=r"^report: findings\.0\.cause: cause 'gremlins'"):
        handed.take({"healthy": False, "findings": [{"host": "web", "component": "x", "cause": "gremlins"}]})
    bad = graded(handed.text, "agent", faults)  # none parsed yet: the last given, and why it scores 0
    assert (bad.score, bad.source) == (0.0, "agent") and "findings.0.cause" in (bad.error or "")
    assert handed.take(truth).startswith("report kept (1 finding(s))")  # an object, or its text
    with pytest.raises(ReportError, match=r"^report: not JSON"):
        handed.take("{nope")
    assert json.loads(handed.text or "") == truth, "a refused report never replaces a good one"
    kept = graded(handed.text, "agent", faults)
    assert (kept.score, kept.source, kept.error) == (1.0, "agent", None)
    assert handed.take('{"healthy": true}').startswith("report kept (healthy)")
    assert graded(handed.text, "agent", faults).score == 0.0, "a later report replaces it"
