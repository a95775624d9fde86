"""`fixos export --format harbor`: task directories that rebuild the seeded broken host.

The live tests run exported tasks with FixOS's own runner of a task
(``fixos.exporter.trial``: build environment/, start it with `sleep infinity`,
run solution/solve.sh, then tests/test.sh, read /logs/verifier/reward.json and the
report's grade, diagnosis.json), so
that `make test` needs no Harbor. That runner is not Harbor and proves nothing
about Harbor: `make harbor-check` runs the tasks under Harbor itself (and checks
Harbor's own pass@k). FIXOS_EXPORT_ALL=1 runs every scenario here instead of one
per difficulty (about 20 s each).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import docker
import pytest
from helpers import removed_run

from fixos.core.errors import InvalidEpisode
from fixos.core.models import InjectedFault
from fixos.diagnosis.truth import truth_report, truths
from fixos.exporter import CaptureShell, ExportError, export_harbor, harbor
from fixos.exporter.capture import PinMissed
from fixos.exporter.harbor import check_exportable, task_toml
from fixos.exporter.pids import PID_OF, located
from fixos.exporter.report import REPORT_PATH, instruction_md, solve_lines, truths_json
from fixos.exporter.settle import settle_lines
from fixos.exporter.trial import build, run_trial
from fixos.injector.edit import spawn_command
from fixos.injector.process import MemoryHog
from fixos.injector.recipes import CAUSES
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.schema import HostSpec
from fixos.scenarios.solution import render
from fixos.shells.fake import FakeShell
from fixos.stack.hosts import LiveHost
from fixos.stack.images import ensure_base
from fixos.stack.sources import pip_build_options

CATALOG = load_catalog()
REPRESENTATIVE = ["easy_4", "medium_3", "hard_4"]
"""a memory hog; a deleted-but-open file; a batch job holding every connection + a
deleted-but-open file + web root permissions: each repaired by killing processes
the faults started at no particular PID (pinned at export). Not the CPU-hog
scenarios: on a loaded machine a hog gets less than the 30 % the check allows."""
TRIAL_SCENARIOS = sorted(CATALOG) if os.environ.get("FIXOS_EXPORT_ALL") else REPRESENTATIVE
PIP_OPTIONS = pip_build_options()  # this machine's pip settings; FIXOS_PIP_OPTIONS overrides


# -- without an engine --------------------------------------------------------


def test_the_vendored_verifier_imports_with_nothing_but_itself(tmp_path) -> None:
    """The exported task's verifier is the vendored modules under lib/, with no FixOS
    installed: every module they import must be vendored too (a new shells/ module that
    the checks import once left every exported task without a reward)."""
    import subprocess
    import sys

    from fixos.exporter.harbor import _vendor

    _vendor(tmp_path)
    probe = (
        "import fixos.verifier, fixos.verifier.backend, fixos.diagnosis; "
        "print(fixos.verifier.__file__, len(fixos.verifier.CHECKS.names()))"
    )
    isolated = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    isolated["PYTHONPATH"] = str(tmp_path)
    # -S: not the site-packages FixOS is installed in (pydantic and testinfra come from there:
    # added back by path, without fixos)
    site = [p for p in sys.path if p.endswith("site-packages")]
    code = f"import sys; sys.path[1:1] = {site!r}; sys.modules.pop('fixos', None); " + probe
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], env=isolated, capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-800:]
    where, count = out.stdout.split()
    assert where.startswith(str(tmp_path)) and int(count) > 20, out.stdout


FAULTS = [
    InjectedFault("service_stopped", "web", {"service": "nginx"}, {}, ""),
    InjectedFault("memory_hog", "web", {}, {"name": "catalog-cache", "pid": 1000, "mb": 300}, ""),
]


def test_the_vendored_verifier_grades_a_report_with_nothing_but_itself(tmp_path) -> None:
    """tests/verify.py's ``diagnose`` on the vendored grading, no FixOS installed: the truth
    baked at export gives full marks to the oracle's report, a report that does not parse
    is one line naming the field, none is 0.0."""
    import subprocess
    import sys

    from fixos.exporter.harbor import TEMPLATES, _vendor

    _vendor(tmp_path / "lib")
    shutil.copyfile(TEMPLATES / "verify_task.py", tmp_path / "verify.py")
    report = tmp_path / "report.json"
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"report": str(report), "truths": truths_json(FAULTS)}))
    isolated = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    isolated["PYTHONPATH"] = f"{tmp_path / 'lib'}{os.pathsep}{tmp_path}"
    site = [p for p in sys.path if p.endswith("site-packages")]
    code = (
        f"import sys, json; sys.path[2:2] = {site!r}; sys.modules.pop('fixos', None); import verify; "
        f"print(json.dumps(verify.diagnose(json.load(open({str(spec)!r})))))"
    )

    def diagnose() -> dict:
        out = subprocess.run(
            [sys.executable, "-S", "-c", code], env=isolated, capture_output=True, text=True, cwd=tmp_path
        )
        assert out.returncode == 0, out.stderr[-800:]
        return json.loads(out.stdout)

    assert diagnose() == {
        "score": 0.0, "recall": 0.0, "precision": 0.0, "per_fault": [
            {"type": "service_stopped", "host": "web", "finding": None, "credit": 0.0},
            {"type": "memory_hog", "host": "web", "finding": None, "credit": 0.0},
        ], "source": "none", "error": None,
    }  # fmt: skip
    report.write_text(json.dumps(truth_report(truths(FAULTS))))
    full = diagnose()
    assert (full["score"], full["source"], full["error"]) == (1.0, "file", None)
    assert [f["credit"] for f in full["per_fault"]] == [1.0, 1.0]
    report.write_text('{"healthy": false, "findings": [{"host": "web", "cause": "permission"}]}')
    bad = diagnose()
    assert (bad["score"], bad["source"]) == (0.0, "file")
    assert bad["error"] == f"{report}: findings.0.component: Field required"


def test_the_instruction_says_where_the_report_goes_and_solve_sh_writes_the_truth() -> None:
    said = instruction_md(CATALOG["split_1"])
    assert said.startswith(CATALOG["split_1"].instruction.rstrip("\n") + "\n\n---\n")
    assert f"`{REPORT_PATH}`" in said and all(f"`{cause}`" in said for cause in CAUSES)
    assert "this server is `web`; its peers, reached with `ssh NAME`: `app`, `db`" in said
    assert "peers" not in instruction_md(CATALOG["easy_1"])
    lines = solve_lines(FAULTS)
    heredoc = re.search(r"cat > (\S+) <<'FIXOS_REPORT'\n(.*)\nFIXOS_REPORT\n$", lines, re.DOTALL)
    assert heredoc and heredoc.group(1) == REPORT_PATH
    assert json.loads(heredoc.group(2)) == truth_report(truths(FAULTS))
    assert truths_json(FAULTS)[1]["identities"] == ["1000"]  # the PID pinned at export


def test_capture_shell_pins_processes_started_at_any_pid() -> None:
    shell = FakeShell(lambda command: "1000" if "ns_last_pid" in command else "")
    capture = CaptureShell(shell)
    capture.run("install the hog")
    capture.run("setsid /usr/local/bin/catalog-cache </dev/null >/dev/null 2>&1 & echo $!")
    capture.run(spawn_command("/usr/local/bin/thumb-worker", 1500))  # a fault's own pin
    capture.stop()
    capture.run("service nginx status")
    assert len(capture.commands) == 3
    # FixOS runs the strict pin (a miss makes the export fail) ...
    assert shell.commands[1] == spawn_command("/usr/local/bin/catalog-cache", 1000)
    # ... and the replay the lenient one (a miss starts the program anyway).
    assert capture.commands[1] == spawn_command("/usr/local/bin/catalog-cache", 1000, strict=False)
    assert capture.commands[2] == spawn_command("/usr/local/bin/thumb-worker", 1500, strict=False)
    assert "PAST" not in capture.commands[2] and "while [ $last -lt 1499 ]" in capture.commands[2]
    assert shell.commands[-1] == "service nginx status"


def test_a_pin_missed_in_capture_is_captured_again_on_a_fresh_host(monkeypatch, tmp_path) -> None:
    """Another fork in the host can take the chosen PID in the instant before the spawn (the
    capture of easy_4 in `make test` once got 2001 for 2000): a harness failure, not the
    scenario's; the export captures once more, and says so; a second miss fails the export."""
    missed = CaptureShell(FakeShell(lambda command: "1001" if "ns_last_pid" in command else ""))
    with pytest.raises(PinMissed, match="cannot pin /usr/local/bin/catalog-cache to PID 1000: 1001"):
        missed.run("setsid /usr/local/bin/catalog-cache </dev/null >/dev/null 2>&1 & echo $!")
    assert issubclass(PinMissed, InvalidEpisode)

    calls, said = [], []

    def capture_missing(times: int):
        def fake(scenario, seed, **kwargs):
            calls.append(seed)
            if len(calls) <= times:
                raise PinMissed("cannot pin /home/deploy/bin/audit-forwarder to PID 2000: 2001")
            return SimpleNamespace(seed=seed, commands={"web": ["echo broken"]})

        return fake

    monkeypatch.setattr(harbor, "write_task", lambda cap, out: out / f"task-{cap.seed}")
    monkeypatch.setattr(harbor, "capture", capture_missing(1))
    written = export_harbor(
        [CATALOG["easy_4"]], [3], tmp_path, client=None, images={}, run_id="r", say=said.append
    )
    assert calls == [3, 3] and written == [tmp_path / "task-3"]
    assert said[0].endswith("to PID 2000: 2001; capturing again on a fresh host")
    calls.clear()
    monkeypatch.setattr(harbor, "capture", capture_missing(2))
    with pytest.raises(PinMissed):
        export_harbor([CATALOG["easy_4"]], [3], tmp_path, client=None, images={}, run_id="r")
    assert calls == [3, 3]


def test_solution_names_pinned_processes_through_pid_of() -> None:
    faults = [
        InjectedFault("cpu_hog", "web", {}, {"processes": [{"name": "thumb-worker", "pid": 1000}]}, ""),
        InjectedFault(
            "deleted_open_file", "web", {}, {"name": "event-relay", "pid": 2000, "file": "/x y"}, ""
        ),
    ]
    names = "kill {{ cpu_hog.processes.0.pid }} {{ deleted_open_file.pid }}; cat {{ deleted_open_file.file }}"
    script = render(names, located(faults))
    assert script == """kill "$(pid_of thumb-worker 1000)" "$(pid_of event-relay 2000)"; cat '/x y'"""
    assert (
        render("kill {{ deleted_open_file.pid }}", faults) == "kill 2000"
    )  # FixOS's own runs keep the number
    # ... and so does a fault type's reference fix, rendered for the replay
    assert render("{{ fix(cpu_hog) }}", located(faults)) == 'kill "$(pid_of thumb-worker 1000)"'


def test_replay_waits_for_the_symptoms_the_faults_confirm() -> None:
    faults = [
        InjectedFault("service_stopped", "web", {"service": "nginx"}, {}, ""),
        InjectedFault("memory_hog", "web", {}, {"name": "catalog-cache", "pid": 1000, "mb": 300}, ""),
        InjectedFault(
            "service_killer", "web", {"service": "nginx"}, {"name": "web-watchdog", "pid": 2000}, ""
        ),
    ]
    hog, killer = settle_lines(faults)  # a stopped service is down when its inject returns
    # The fault's own test (its confirm runs it with the plain PID), the PID looked up by name.
    assert MemoryHog(MemoryHog.Params()).symptom(faults[1].seeded) in hog.replace(
        '"$(pid_of catalog-cache 1000)"', "1000"
    )
    assert "VmRSS" in hog and "-ge 270 ]" in hog
    assert '! service nginx status >/dev/null 2>&1 && kill -0 "$(pid_of web-watchdog 2000)"' in killer


def test_task_toml_has_harbor_fields() -> None:
    config = tomllib.loads(task_toml(CATALOG["hard_3"], 2))
    assert config["metadata"]["difficulty"] == "hard"
    assert config["metadata"]["fixos_seed"] == 2
    assert config["agent"]["timeout_sec"] == CATALOG["hard_3"].limits.wall_seconds
    assert config["environment"]["cpus"] == 2 and config["environment"]["memory_mb"] == 512
    assert config["verifier"]["timeout_sec"] > 0


def test_a_host_of_another_image_is_refused_naming_the_field() -> None:
    scenario = CATALOG["easy_1"]
    two = scenario.model_copy(update={"hosts": [*scenario.hosts, HostSpec(name="db", image="inspector")]})
    with pytest.raises(ExportError, match=r"^scenarios/easy_1\.yaml: hosts\[1\]\.image: only the server"):
        check_exportable(two)


# -- against a live engine ----------------------------------------------------


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def module_run_id(client: docker.DockerClient) -> Iterator[str]:
    with removed_run(client, f"test-export-{os.urandom(4).hex()}") as run_id:
        yield run_id


@pytest.fixture(scope="module")
def exported(
    client: docker.DockerClient, images: dict[str, str], module_run_id: str, tmp_path_factory
) -> Path:
    out = tmp_path_factory.mktemp("harbor")
    scenarios = [CATALOG[name] for name in TRIAL_SCENARIOS]
    export_harbor(scenarios, [1], out, client=client, images=images, run_id=module_run_id)
    return out


@pytest.mark.live
def test_pid_of_finds_a_process_that_missed_its_pin(live_host: LiveHost) -> None:
    with live_host.shell() as shell:
        shell.run("printf '#!/bin/sh\\nwhile :; do sleep 1; done\\n' > /usr/local/bin/event-relay")
        shell.run("chmod +x /usr/local/bin/event-relay; cp /usr/local/bin/event-relay /usr/local/bin/relay")
        real = shell.run(spawn_command("/usr/local/bin/event-relay", None)).output.split()[-1]
        shell.run(spawn_command("/usr/local/bin/relay", None))  # a namesake's suffix must not match
        ask = "bash -c " + shlex.quote(PID_OF + 'pid_of "$@"') + " pid_of event-relay "
        assert shell.run(ask + real).output.strip() == real  # it landed where it was pinned
        assert shell.run(ask + "1").output.strip() == real  # someone else holds the pinned PID
        assert shell.run(ask + str(int(real) + 7)).output.strip() == real  # the pinned PID is free
        assert not shell.run(ask.replace("event-relay", "audit-forwarder") + real).output.strip()


@pytest.mark.live
def test_same_seed_gives_the_same_bytes(
    client: docker.DockerClient, images: dict[str, str], test_run_id: str, tmp_path: Path
) -> None:
    scenarios = [CATALOG["hard_5"]]  # a memory hog at no particular PID, inodes, a database link
    for name in ("a", "b"):
        export_harbor(scenarios, [3], tmp_path / name, client=client, images=images, run_id=test_run_id)
    first, second = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert sorted(first) == sorted(second)
    for path in first:
        assert first[path] == second[path], f"{path} differs between two exports of the same seed"
    task = tmp_path / "a" / "hard_5-s3"
    assert re.search(r"kill \"\$\(pid_of /[a-z/.-]+ 1000\)\"", (task / "solution" / "solve.sh").read_text())
    spec = json.loads((task / "tests" / "spec.json").read_text())
    assert {c["name"] for c in spec["checks"]} == set(spec["baseline"])
    assert not re.search(r"20\d\d-\d\d-\d\d", (task / "tests" / "spec.json").read_text())


@pytest.mark.live
@pytest.mark.parametrize("scenario", TRIAL_SCENARIOS)
def test_exported_task_scores_like_fixos_under_fixos_own_runner(
    client: docker.DockerClient, exported: Path, module_run_id: str, scenario: str
) -> None:
    task = exported / f"{scenario}-s1"
    tag = f"fixos-export-test/{scenario}:{module_run_id}"  # removed with the module's run
    base = ensure_base(client, lambda line: None)
    build(client, task, tag, run_id=module_run_id, buildargs={"BASE": base, "PIP_OPTIONS": PIP_OPTIONS})
    solved = run_trial(client, task, tag, run_id=module_run_id, solve=True)
    # One key: Harbor computes pass@k only then, and headlines the first key of several.
    assert solved.reward == {"reward": 1.0}, solved.test_output + solved.solve_output
    spec = json.loads((task / "tests" / "spec.json").read_text())
    assert [c["name"] for c in solved.checks] == [c["name"] for c in spec["checks"]]
    assert all(c["passed"] for c in solved.checks)
    # solve.sh wrote the truth where instruction.md says, graded beside reward.json
    assert REPORT_PATH in (task / "instruction.md").read_text() and spec["report"] == REPORT_PATH
    assert len(spec["truths"]) == len(CATALOG[scenario].faults)
    assert solved.diagnosis is not None, solved.test_output
    assert (solved.diagnosis["score"], solved.diagnosis["source"]) == (1.0, "file"), solved.diagnosis
    untouched = run_trial(client, task, tag, run_id=module_run_id, solve=False)
    assert untouched.reward == {"reward": 0.0}, untouched.test_output
    assert untouched.diagnosis is not None
    assert (untouched.diagnosis["score"], untouched.diagnosis["source"]) == (0.0, "none")
    assert {"name", "passed", "scored", "weight", "detail"} <= set(untouched.checks[0])
    assert not all(c["passed"] for c in untouched.checks)


@pytest.mark.live
def test_replay_whose_pin_misses_still_scores_like_fixos(
    client: docker.DockerClient, exported: Path, module_run_id: str, tmp_path: Path
) -> None:
    """A host that forked more than the exporting one (a busy boot) passes the pinned
    PID before the replay gets there: the memory hog starts further on, the replay
    still waits for it, the repair still finds it, the verdicts stay 1.0 / 0.0."""
    task = tmp_path / "easy_4-s1"
    shutil.copytree(exported / "easy_4-s1", task)
    script = task / "environment" / "task" / "usr" / "local" / "share" / "fixos" / "break-host"
    lines = script.read_text().splitlines(keepends=True)
    pin = next(i for i, line in enumerate(lines) if "ns_last_pid" in line)
    pinned = int(re.search(r"\$last -lt (\d+) \]", lines[pin]).group(1)) + 1
    lines.insert(pin, f"for _ in $(seq 1 {pinned + 100}); do : & wait $!; done\n")
    script.write_text("".join(lines))
    solve = task / "solution" / "solve.sh"
    solve.write_text(solve.read_text().replace("set -euo pipefail\n", "set -euxo pipefail\n"))

    tag = f"fixos-export-test/easy_4-busy:{module_run_id}"
    base = ensure_base(client, lambda line: None)
    build(client, task, tag, run_id=module_run_id, buildargs={"BASE": base, "PIP_OPTIONS": PIP_OPTIONS})
    solved = run_trial(client, task, tag, run_id=module_run_id, solve=True)
    killed = re.findall(r"^\+ kill (\d+)$", solved.solve_output, re.MULTILINE)
    assert killed and int(killed[0]) > pinned, solved.solve_output  # it did miss, and was found
    assert solved.reward["reward"] == 1.0, solved.test_output + solved.solve_output
    untouched = run_trial(client, task, tag, run_id=module_run_id, solve=False)
    assert untouched.reward["reward"] == 0.0, untouched.test_output
