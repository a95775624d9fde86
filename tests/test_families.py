"""Fault families: every fault type has one, episodes carry theirs, and the bench's
summary, report and console tables give the solve rate per family. Fast: no container."""

from __future__ import annotations

from helpers import episode_record
from rich.console import Console

from fixos.injector import FAULTS
from fixos.injector.families import FAMILIES, families_of, family_of
from fixos.records.report import markdown
from fixos.records.summary import summarize
from fixos.scenarios.catalog import load_catalog
from fixos.views.terminal import summary_tables

KNOWN = {"service", "config", "process", "disk", "database", "permissions", "dependency"}
KNOWN |= {"network", "tls", "host"}


def test_every_registered_fault_type_has_a_family() -> None:
    missing = sorted(set(FAULTS.names()) - set(FAMILIES))
    assert not missing, f"give these fault types a family in injector/families.py: {missing}"
    assert set(FAMILIES.values()) <= KNOWN


def test_an_unknown_type_is_its_own_family() -> None:
    assert family_of("cpu_hog") == "process"
    assert family_of("brand_new_fault") == "brand_new_fault"
    assert families_of(["cpu_hog", "memory_hog", "disk_fill", "whatever"]) == ["disk", "process", "whatever"]


def test_every_scenario_belongs_to_known_families() -> None:
    for scenario in load_catalog().values():
        assert set(families_of(scenario.fault_types)) <= KNOWN, scenario.id


def test_the_summary_gives_the_solve_rate_per_family() -> None:
    records = [
        episode_record("a", "baseline", 1.0, families=["process"]),
        episode_record("b", "baseline", 0.5, families=["process", "disk"]),  # counts in both families
        episode_record("c", "baseline", 0.0, families=["disk"]),
        episode_record("d", "baseline", None, families=["tls"]),  # invalid: in the count, not in the rate
        episode_record("a", "oracle", 1.0, families=["process"]),
    ]
    summary = summarize("r", records)
    process, disk, tls = (summary.families[f]["baseline"] for f in ("process", "disk", "tls"))
    assert (process.episodes, process.solved_pct, process.mean_reward) == (2, 50.0, 0.75)
    assert (disk.episodes, disk.solved_pct, disk.mean_reward) == (2, 0.0, 0.25)
    assert (tls.episodes, tls.invalid, tls.solved_pct) == (1, 1, None)
    assert summary.families["process"]["oracle"].solved_pct == 100.0
    assert summary.families["disk"]["oracle"].episodes == 0
    assert list(summary.families) == ["disk", "process", "tls"]
    assert type(summary).model_validate_json(summary.model_dump_json()) == summary

    report = markdown(summary, None)
    assert "## By fault family" in report
    assert "| process | 0.75 (50% solved) | 1.00 (100% solved) |" in report
    console = Console(width=200, record=True)
    for table in summary_tables(summary):
        console.print(table)
    text = console.export_text()
    assert "by fault family" in text and "0.25 · 0%" in text


def test_a_summary_written_before_families_still_reads() -> None:
    summary = summarize("r", [episode_record("a", "baseline", 1.0, families=["process"])])
    data = summary.model_dump(mode="json")
    del data["families"]
    assert type(summary).model_validate(data).families == {}
