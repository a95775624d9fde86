"""Saved files as versioned models, and the failure table that decides what the
bench retries. Fast: no container."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

import fixos.bench.local as bench_module
from fixos.bench.local import Bench, Plan
from fixos.core.errors import (
    EngineError,
    InvalidEpisode,
    RecordError,
    ShellError,
    StackError,
    UnhealthyHost,
)
from fixos.core.models import CheckResult, InjectedFault, Step, Verdict
from fixos.episodes.episode import Episode, run_episode
from fixos.records import failures
from fixos.records.failures import (
    FAILURES,
    AtFault,
    EpisodeStatus,
    Failure,
    FailureKind,
    agent_failure,
    harness_failure,
    kind_of,
    retry_wanted,
)
from fixos.records.models import EpisodeRecord, FaultsFile, RewardFile, StepLine, Timings
from fixos.records.rundir import RunDir, read_interrupted, read_reward, read_transcript, write_interrupted
from fixos.records.saved import Journal, read_lines, read_model, write_model
from fixos.records.summary import Summary, compare, read_summary, summarize
from fixos.scenarios.catalog import load_catalog
from fixos.stack.engine import Engine


def record(
    episode_id: str = "easy_1-s1-oracle", *, reward: float | None = 1.0, failure: Failure | None = None
) -> EpisodeRecord:
    verdict = (
        None if reward is None else Verdict(reward, [CheckResult("site", "http", True, True, 1.0, "200")])
    )
    return EpisodeRecord(
        run_id="r",
        episode_id=episode_id,
        scenario=episode_id.split("-")[0],
        difficulty="easy",
        seed=1,
        agent=episode_id.rsplit("-", 1)[1],
        status=EpisodeStatus.scored if reward is not None else EpisodeStatus.invalid,
        reward=reward,
        solved=reward == 1.0,
        steps=1,
        timings=Timings(reset=1.5, boot=0.2, agent=2.0, verify=0.3, step_mean=0.01),
        faults=[InjectedFault("service_stopped", "web", {"service": "nginx"}, {"pid": 909}, "status exit 3")],
        verdict=verdict,
        failure=failure,
        images={"fixos/server:abc": "sha256:1"},
    )


# -- round trips ---------------------------------------------------------------


def test_an_episode_round_trips_through_the_run_directory(tmp_path: Path) -> None:
    run = RunDir(tmp_path, "r")
    scored = record(failure=agent_failure(ValueError("oops")))
    invalid = record("easy_2-s1-nop", reward=None, failure=harness_failure(StackError("no boot")))
    step = Step(0, "service nginx start", "ok\n", 0, 0.25, 1700000000.0)
    directory = run.write_episode(scored, [step])
    run.write_episode(invalid, [])
    assert run.records() == [scored, invalid]
    assert run.records()[0].verdict == scored.verdict  # the dataclasses inside come back as themselves
    assert read_transcript(directory) == [StepLine.of(step)]
    assert read_model(FaultsFile, directory / "faults.json").faults == scored.faults
    reward = read_reward(directory)
    assert reward is not None and reward.reward == 1.0 and reward.checks[0].name == "site"
    line = json.loads(run.episodes.read_text().splitlines()[1])
    assert line["schema_version"] == 1 and line["status"] == "invalid"
    assert line["failure"] == {"kind": "boot_failed", "detail": "StackError: no boot"}


def test_an_interrupted_episode_is_on_disk_but_not_journalled_until_it_is_run_again(tmp_path: Path) -> None:
    run = RunDir(tmp_path, "r")
    stopped = record(reward=None, failure=Failure(kind=FailureKind.interrupted, detail="stopped"))
    step = Step(0, "uptime", "up\n", 0, 0.1, 1700000000.0)
    directory = run.episode_dir(stopped.episode_id)
    write_interrupted(directory, stopped, [step])
    assert run.records() == []
    assert read_interrupted(directory) == stopped
    assert read_transcript(directory) == [StepLine.of(step)]
    finished = record()
    run.write_episode(finished, [])
    assert run.records() == [finished]
    assert read_interrupted(directory) is None, "a finished run no longer says it was interrupted"


def test_plan_and_summary_round_trip(tmp_path: Path) -> None:
    run = RunDir(tmp_path, "r")
    plan = Plan(scenarios=["easy_1"], seeds=[1, 2], agents=["oracle", "nop"], transport="ssh", shard=(1, 2))
    plan.save(run)
    assert Plan.load(run) == plan
    summary = summarize("r", [record(), record("easy_1-s1-nop", reward=0.0)])
    write_model(tmp_path / "summary.json", summary)
    assert read_summary(tmp_path / "summary.json") == summary
    assert compare(read_summary(tmp_path / "summary.json"), summary, 0.05) == []


def test_summary_counts_failures_by_kind() -> None:
    records = [
        record(failure=agent_failure(RuntimeError("x"))),
        record("easy_1-s2-oracle", reward=None, failure=harness_failure(ShellError("gone"))),
    ]
    stats = summarize("r", records).overall["oracle"]
    assert (stats.episodes, stats.invalid, stats.mean_reward) == (2, 1, 1.0)
    assert stats.failures == {FailureKind.agent_error: 1, FailureKind.shell_lost: 1}


def test_summaries_show_the_diagnosis_beside_the_reward() -> None:
    from fixos.records.models import Diagnosed
    from fixos.records.report import markdown
    from fixos.views.terminal import summary_tables

    reported = record()
    reported.diagnosis = Diagnosed(score=0.8, source="agent")
    silent = record("easy_1-s2-oracle")
    silent.diagnosis = Diagnosed(score=0.0, source="none")  # no report: not in the mean
    nop = record("easy_1-s1-nop", reward=0.0)
    summary = summarize("r", [reported, silent, nop])
    assert summary.overall["oracle"].mean_diagnosis == 0.8
    assert summary.overall["nop"].mean_diagnosis is None
    assert "1.00 (100% solved, diagnosis 0.80)" in markdown(summary, None)
    console = Console(width=200, file=io.StringIO())
    for table in summary_tables(summary):
        console.print(table)
    assert "diagnosis 0.80" in console.file.getvalue()


# -- files that do not fit: one line naming the file (and line) -------------------------


def _one_line_error(excinfo: pytest.ExceptionInfo[RecordError]) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    write_model(path, summarize("r", [record()]))
    path.write_text(path.read_text().replace('"schema_version": 1', '"schema_version": 2'))
    with pytest.raises(RecordError) as excinfo:
        read_summary(path)
    assert _one_line_error(excinfo) == (
        f"{path}: not a valid Summary: schema_version 2 is newer than this FixOS reads (1): upgrade FixOS"
    )


def test_a_file_without_a_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"scenarios": ["easy_1"], "seeds": [1], "agents": ["nop"]}))
    with pytest.raises(RecordError, match=r"plan.json: not a valid Plan: no schema_version") as excinfo:
        Plan.load(RunDir(tmp_path.parent, tmp_path.name))
    _one_line_error(excinfo)


def test_garbage_in_the_journal_names_the_line(tmp_path: Path) -> None:
    run = RunDir(tmp_path, "r")
    run.write_episode(record(), [])
    with run.episodes.open("a") as f:
        f.write("{not json\n")
    with pytest.raises(RecordError) as excinfo:
        run.records()
    assert _one_line_error(excinfo).startswith(f"{run.episodes}:2: not a valid EpisodeRecord: Invalid JSON")


def test_a_journal_line_cut_off_by_a_kill_is_not_a_record_and_is_replaced(tmp_path: Path) -> None:
    """SIGKILL mid-append leaves a line without its newline: --resume must read
    the complete lines (the cut episode runs again) and the next append must not
    continue the torn line."""
    run = RunDir(tmp_path, "r")
    first = record()
    run.write_episode(first, [])
    with run.episodes.open("a") as f:
        f.write(record("easy_2-s1-nop").model_dump_json()[:40])
    assert run.records() == [first]
    second = record("easy_3-s1-nop")
    run.write_episode(second, [])
    assert run.records() == [first, second]
    assert run.episodes.read_text().count("\n") == 2


def test_a_journal_read_again_parses_only_what_was_appended_and_reads_as_read_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live run page reads the journal at every episode's start and end: each line is
    parsed once; a torn tail waits for its newline; a replaced or shortened file, garbage, a
    file that is not there read as ``read_lines`` reads them."""
    run = RunDir(tmp_path, "r")
    journal = Journal(EpisodeRecord, run.episodes)
    assert journal.read() == []  # no journal yet
    first, second = record(), record("easy_2-s1-nop")
    run.write_episode(first, [])
    parsed: list[str] = []
    real = EpisodeRecord.model_validate_json
    monkeypatch.setattr(
        EpisodeRecord, "model_validate_json", lambda text, **kw: parsed.append(text) or real(text, **kw)
    )
    assert journal.read() == [first] and len(parsed) == 1
    with run.episodes.open("a") as f:  # a kill mid-append: not a record yet
        f.write(second.model_dump_json()[:40])
    assert journal.read() == [first] and len(parsed) == 1
    run.write_episode(second, [])  # drops the torn tail, then appends the whole line
    assert journal.read() == [first, second] and len(parsed) == 2
    assert journal.read() == [first, second] and len(parsed) == 2  # nothing new, nothing parsed
    assert journal.read() == run.records()
    run.episodes.write_text(second.model_dump_json() + "\n")  # shorter: read from its start
    assert journal.read() == [second]
    with run.episodes.open("a") as f:
        f.write("{not json\n")
    with pytest.raises(RecordError) as excinfo:
        journal.read()
    assert _one_line_error(excinfo).startswith(f"{run.episodes}:2: not a valid EpisodeRecord")
    with pytest.raises(RecordError):  # the bad line is still there: nothing was kept past it
        journal.read()
    run.episodes.unlink()
    assert journal.read() == []


def test_a_wrong_field_names_the_field(tmp_path: Path) -> None:
    run = RunDir(tmp_path, "r")
    run.write_episode(record(), [])
    line = json.loads(run.episodes.read_text())
    run.episodes.write_text(json.dumps(line | {"status": "maybe"}) + "\n")
    with pytest.raises(RecordError, match=rf"^{run.episodes}:1: not a valid EpisodeRecord: status: Input"):
        run.records()


def test_compare_against_a_file_that_is_no_summary(tmp_path: Path) -> None:
    path = tmp_path / "junk.json"
    path.write_text("[1, 2]")
    with pytest.raises(RecordError, match=r"junk.json: not a valid Summary: Input should be") as excinfo:
        read_summary(path)
    _one_line_error(excinfo)
    with pytest.raises(RecordError, match=r"missing.json: cannot read it"):
        read_summary(tmp_path / "missing.json")


def test_models_made_in_code_carry_their_version() -> None:
    assert json.loads(record().model_dump_json())["schema_version"] == 1
    assert all(
        cls.reads_version() == 1 for cls in (EpisodeRecord, StepLine, FaultsFile, RewardFile, Summary, Plan)
    )


def test_lines_read_with_the_model_they_were_written_with(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(StepLine.of(Step(0, "ls", "", 0, 0.1, 1.0)).model_dump_json() + "\n\n")
    assert [s.command for s in read_lines(StepLine, path)] == ["ls"]
    with pytest.raises(RecordError, match=r"t.jsonl:1: not a valid FaultsFile"):
        read_lines(FaultsFile, path)


# -- the failure table ------------------------------------------------------------------------


def test_every_kind_has_a_row_and_agent_failures_are_scored_never_retried() -> None:
    assert set(FAILURES) == set(FailureKind)
    for kind, row in FAILURES.items():
        if row.at_fault is AtFault.agent:
            assert row.status is EpisodeStatus.scored and not row.retried, kind
        else:
            assert row.status is not EpisodeStatus.scored, kind


def test_exceptions_map_onto_kinds() -> None:
    assert kind_of(UnhealthyHost("checks fail on the healthy host")) is FailureKind.healthy_check_failed
    assert kind_of(InvalidEpisode("fault not confirmed")) is FailureKind.fault_unconfirmed
    assert kind_of(StackError("no boot")) is FailureKind.boot_failed
    assert kind_of(ShellError("closed")) is FailureKind.shell_lost
    assert kind_of(EngineError("no engine")) is FailureKind.engine_error
    assert kind_of(KeyboardInterrupt()) is FailureKind.interrupted
    try:
        {}["missing"]
    except KeyError as exc:
        bug = harness_failure(exc)
    assert bug.kind is FailureKind.harness_bug
    assert bug.detail.startswith("KeyError: 'missing' (at ") and "test_records.py:" in bug.detail
    assert agent_failure(ValueError("x")).text == "agent_error: agent raised ValueError: x"


def test_retry_wanted_reads_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not retry_wanted(None)
    for kind, row in FAILURES.items():
        assert retry_wanted(Failure(kind=kind, detail="d")) is row.retried
    flipped = dataclasses.replace(FAILURES[FailureKind.boot_failed], retried=False)
    monkeypatch.setitem(failures.FAILURES, FailureKind.boot_failed, flipped)
    assert not retry_wanted(Failure(kind=FailureKind.boot_failed, detail="d"))


class FakeEpisodes:
    """Stands in for run_episode: every run of an episode ends with ``failure``."""

    def __init__(self, failure: Failure | None) -> None:
        self.failure, self.calls = failure, 0

    def __call__(self, scenario: object, seed: int, agent: str, **_: object) -> tuple[EpisodeRecord, list]:
        self.calls += 1
        done = record(f"easy_1-s{seed}-{agent}")
        if self.failure is not None and self.failure.kind is FailureKind.agent_error:
            done.failure = self.failure
        elif self.failure is not None:
            done.fail(self.failure)
        return done, []


def _bench_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: Failure | None
) -> tuple[int, RunDir]:
    fake = FakeEpisodes(failure)
    monkeypatch.setattr(bench_module, "run_episode", fake)
    monkeypatch.setattr(bench_module, "remove_labelled", lambda *a, **k: None)
    run = RunDir(tmp_path, f"r{len(list(tmp_path.iterdir()))}")
    plan = Plan(scenarios=["easy_1"], seeds=[1], agents=["oracle"])
    engine = Engine("local", None, {})  # type: ignore[arg-type]  # never reached: run_episode is fake
    Bench(plan, run, {"easy_1": None}, engines=[engine], parallel=1, warm=False).execute()  # type: ignore[dict-item]
    return fake.calls, run


@pytest.mark.parametrize("kind", list(FailureKind))
def test_the_bench_retries_what_the_table_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: FailureKind
) -> None:
    calls, run = _bench_once(tmp_path, monkeypatch, Failure(kind=kind, detail="d"))
    assert calls == (2 if FAILURES[kind].retried else 1)
    journaled = run.records()
    if FAILURES[kind].status is EpisodeStatus.interrupted:
        assert journaled == []  # so that --resume runs it again
    else:
        assert [r.failure.kind for r in journaled if r.failure] == [kind]
        assert journaled[0].status is FAILURES[kind].status


def test_a_harness_kind_marked_not_retried_is_not_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost = Failure(kind=FailureKind.shell_lost, detail="gone")
    assert _bench_once(tmp_path, monkeypatch, lost)[0] == 2
    flipped = dataclasses.replace(FAILURES[FailureKind.shell_lost], retried=False)
    monkeypatch.setitem(failures.FAILURES, FailureKind.shell_lost, flipped)
    assert _bench_once(tmp_path, monkeypatch, lost)[0] == 1


def test_a_scored_episode_runs_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls, run = _bench_once(tmp_path, monkeypatch, None)
    assert calls == 1 and run.records()[0].scored


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (UnhealthyHost("checks fail on the healthy host: site: 502"), FailureKind.healthy_check_failed),
        (
            InvalidEpisode("fault service_stopped on web could not be confirmed"),
            FailureKind.fault_unconfirmed,
        ),
        (StackError("cannot start the hosts"), FailureKind.boot_failed),
        (KeyError("typo"), FailureKind.harness_bug),
    ],
)
def test_run_episode_records_the_kind_of_a_harness_failure(
    monkeypatch: pytest.MonkeyPatch, raised: Exception, kind: FailureKind
) -> None:
    def reset(self: Episode) -> None:
        raise raised

    monkeypatch.setattr(Episode, "reset", reset)
    monkeypatch.setattr(Episode, "close", lambda self: None)
    scenario = load_catalog()["easy_1"]
    done, steps = run_episode(scenario, 1, "oracle", client=None, images={}, run_id="r")  # type: ignore[arg-type]
    assert (done.status, done.reward, steps) == (FAILURES[kind].status, None, [])
    assert done.failure is not None and done.failure.kind is kind
    assert done.failure.detail.startswith(f"{type(raised).__name__}: ")


def test_nightly_shards_cover_every_test_exactly_once() -> None:
    from helpers import shard

    items = list(range(751))
    parts = [shard(items, f"{k}/4") for k in range(1, 5)]
    assert sorted(x for part in parts for x in part) == items
    assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1
    assert shard(items, "1/1") == items
    for bad in ("0/4", "5/4", "x", "1/0"):
        with pytest.raises(ValueError):
            shard(items, bad)
