"""Task levels and fault-free controls without containers: the grade at each level, what the
instruction says, the gates a report-only task adds, and how a control is validated."""

from __future__ import annotations

import json

import pytest

from fixos.bench.local import Plan
from fixos.bench.validate import agents_for, meets, why
from fixos.core.errors import FixOSError, ScenarioError
from fixos.core.models import CheckResult, InjectedFault, Verdict
from fixos.diagnosis import grade, parse_report, truths
from fixos.episodes import tasks
from fixos.injector import FAULTS
from fixos.records.models import Diagnosed, EpisodeRecord, Timings
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.schema import parse_scenario
from fixos.verifier import CHECKS
from fixos.verifier.untouched import Untouched, UntouchedParams, _shape, _watched

CATALOG = load_catalog()
SQUATTER = InjectedFault("port_squatter", "web", {"service": "nginx", "port": 80}, {"pid": 922}, "")


def _report(findings: list[dict], healthy: bool = False):
    return parse_report(json.dumps({"healthy": healthy, "findings": findings}))


def test_each_level_grades_what_it_asks():
    faults = truths([SQUATTER])
    right_place = {"host": "web", "component": "port:80", "cause": "config_error", "evidence": ""}
    assert grade(_report([right_place]), faults, "diagnose").score == 0.5  # place only, no cause, no pid
    assert grade(_report([right_place]), faults, "localise").score == 1.0  # where is all it asks
    assert grade(_report([{**right_place, "host": "db"}]), faults, "localise").score == 0.0
    assert grade(_report([]), faults, "detect").score == 1.0  # "something is wrong" is detection
    assert grade(_report([], healthy=True), faults, "detect").score == 0.0
    assert grade(None, faults, "detect").score == 0.0
    assert (
        grade(_report([right_place]), faults, "repair").score == grade(_report([right_place]), faults).score
    )
    # a control: "healthy" and nothing else, at every level
    for level in ("diagnose", "localise", "detect", "repair"):
        assert grade(_report([], healthy=True), [], level).score == 1.0
        assert grade(_report([]), [], level).score == 0.0
        assert grade(None, [], level).score == 0.0
    with pytest.raises(ValueError, match="level must be one of"):
        grade(None, faults, "triage")


def test_a_report_only_task_says_so_and_a_repair_is_as_written():
    words = CATALOG["easy_1"].instruction
    assert tasks.instruction_for("repair", words) == words
    for level in ("diagnose", "localise", "detect"):
        said = tasks.instruction_for(level, words)
        assert said.startswith(words.rstrip()) and "do NOT change anything" in said and '"healthy"' in said
    with pytest.raises(FixOSError, match="--task must be one of"):
        tasks.task_level("fix")
    assert tasks.leaves_as_found("repair", 2) is False
    assert tasks.leaves_as_found("repair", 0) is True  # a control
    assert tasks.leaves_as_found("detect", 2) is True
    with pytest.raises(ValueError):
        Plan(scenarios=["easy_1"], seeds=[1], agents=["nop"], task="fix")  # type: ignore[arg-type]


def _check(name: str, passed: bool, scored: bool = True) -> CheckResult:
    return CheckResult(name, "t", passed, scored, 1.0, "")


def test_symptoms_mended_at_a_report_only_level_zero_the_report():
    confirmed = Verdict(0.0, [_check("page", False), _check("port", False), _check("gate", True, False)])
    untouched = Verdict(0.0, [_check("page", False), _check("port", False), _check("gate", True, False)])
    mended = Verdict(0.5, [_check("page", True), _check("port", False), _check("gate", True, False)])
    kept = tasks.as_found_verdict(untouched, confirmed, "diagnose")
    assert kept.checks[-1].passed and tasks.report_reward(kept, 0.8) == 0.8
    touched = tasks.as_found_verdict(mended, confirmed, "diagnose")
    assert not touched.checks[-1].passed and "page" in touched.checks[-1].detail
    assert tasks.report_reward(touched, 1.0) == 0.0
    # a scenario's own gate on a fault's effect (an owner the fault changed) fails at both
    # ends: that is the host as found (medium_4, medium_5, hard_7 and net_3 at `diagnose`)
    owned = [_check("page", False), _check("owner", False, False)]
    as_found = tasks.as_found_verdict(Verdict(0.0, owned), Verdict(0.0, owned), "diagnose")
    assert tasks.report_reward(as_found, 0.8) == 0.8
    # a gate that failed then and passes now is left to `untouched` (a flooded MariaDB's knock)
    flapped = tasks.as_found_verdict(
        Verdict(0.0, [owned[0], _check("owner", True, False)]), Verdict(0.0, owned), "localise"
    )
    assert tasks.report_reward(flapped, 1.0) == 1.0
    assert tasks.report_reward(tasks.as_found_verdict(Verdict(0.0, owned), None, "detect"), 1.0) == 0.0
    gate_failed = Verdict(0.0, [_check("page", False), _check("gate", False, False)])
    assert tasks.report_reward(tasks.as_found_verdict(gate_failed, confirmed, "detect"), 1.0) == 0.0
    # a control in a repair task: judged as left, no symptom gate (nothing was broken)
    control = tasks.as_found_verdict(
        Verdict(1.0, [_check("page", True)]), Verdict(1.0, [_check("page", True)]), "repair"
    )
    assert [c.name for c in control.checks] == ["page"] and control.reward == 1.0


def test_every_family_has_a_control_and_the_untouched_gate_watches_its_services():
    controls = {sid: s for sid, s in CATALOG.items() if not s.faults}
    assert {"control_1", "control_2", "control_3", "control_4"} <= set(controls)
    assert any(len(s.hosts) == 3 for s in controls.values())
    for scenario in controls.values():
        assert agents_for(scenario) == ["oracle", "nop", "meddler"]
        entries = tasks.untouched_entries(scenario)
        assert [e.host for e in entries] == [h.name for h in scenario.hosts]
        for entry, host in zip(entries, scenario.hosts, strict=True):
            assert set(entry.params.services) == set(host.services)


def test_a_control_has_no_partial_repair():
    data = {
        "id": "control_x",
        "title": "t",
        "difficulty": "easy",
        "instruction": "please check the site, if anything is wrong",
        "hosts": [{"name": "web"}],
        "checks": [{"name": "home", "type": "http_page", "params": {"path": "/"}}],
        "solution": "true",
        "partial_solution": "true",
    }
    with pytest.raises(ScenarioError, match="partial_solution"):
        parse_scenario(data, "control_x.yaml", faults=FAULTS, checks=CHECKS)
    del data["partial_solution"]
    assert parse_scenario(data, "control_x.yaml", faults=FAULTS, checks=CHECKS).faults == []


def _record(agent: str, reward: float, diagnosis: float) -> EpisodeRecord:
    return EpisodeRecord(
        run_id="r", episode_id="e", scenario="control_1", difficulty="easy", seed=1, agent=agent,
        status="scored", reward=reward, solved=reward == 1.0, steps=0, timings=Timings(),
        control=True, diagnosis=Diagnosed(score=diagnosis), verdict=Verdict(reward, []),
    )  # fmt: skip


def test_a_control_is_validated_by_its_own_rule():
    assert meets("oracle", _record("oracle", 1.0, 1.0))
    assert not meets("oracle", _record("oracle", 1.0, 0.0))  # it must say healthy
    assert meets("nop", _record("nop", 1.0, 0.0))
    assert not meets("nop", _record("nop", 0.0, 0.0))  # doing nothing is the repair here
    assert meets("meddler", _record("meddler", 0.0, 0.0))
    assert (
        why("meddler", _record("meddler", 1.0, 0.0))[0] == "meddler scored 1.00, diagnosis 0.0, wanted = 0.0"
    )


def test_the_untouched_gate_leaves_out_what_daemons_write_and_compares_files_by_change_time():
    assert _watched("/etc/nginx/nginx.conf") and _watched("/root/.ssh/authorized_keys")
    for path in (
        "/run/nginx.pid",
        "/var/log/nginx/access.log",
        "/var/lib/mysql/ibdata1",
        "/tmp/x",
        "/root/.bash_history",
    ):
        assert not _watched(path), path
    assert _watched("/running") and _watched("/var/lib/mysql-files")
    directory, regular = 0o040755, 0o100644
    assert _shape(directory, 0, 0, 4096, 7, 100) == _shape(directory, 0, 0, 8192, 7, 200)  # times of a dir
    assert _shape(regular, 0, 0, 10, 7, 100) != _shape(regular, 0, 0, 10, 7, 200)  # rewritten the same
    gate = Untouched(UntouchedParams(services=["nginx"]))
    assert not gate.evaluate(None, None).passed  # type: ignore[arg-type]  # no record: fails closed


def test_only_a_repairs_final_verdict_is_settled_by_a_failed_gate():
    """At a report-only level a gate fails as found by design; the other checks must still
    be judged to the end, for ``symptoms_as_found`` to compare them with the confirmation."""
    assert tasks.gates_settle("repair")
    assert not any(tasks.gates_settle(level) for level in tasks.REPORT_ONLY)
