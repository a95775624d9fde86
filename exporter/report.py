"""The report in an exported task (docs/diagnosis.md): where the agent writes it, what the
instruction tells it, and the ground truth the exported verifier grades it against.

The truth is baked at export (``fixos.diagnosis.truths`` of the faults the capture injected,
into tests/spec.json, which Harbor copies in only to verify), and the grading code is
vendored beside the checks (``harbor.VENDORED``), so a task grades a report as FixOS does.
The grade goes to /logs/verifier/diagnosis.json: reward.json stays ``{"reward": x}`` alone
(Harbor's pass@k wants one key), and a report never changes the reward.

A culprit's PID in the truth is the one pinned at export; the replay can push a process a
few PIDs further now and then (``exporter.pids``), and a report naming where it really
runs then misses that fault's identity share (0.2 of its credit).
"""

from __future__ import annotations

import json
from typing import Any

from ..core.models import InjectedFault
from ..diagnosis.truth import truth_report, truths
from ..injector.recipes import CAUSES
from ..scenarios.schema import Scenario
from .compose import login_of

REPORT_PATH = "/root/report.json"
"""where the instruction tells the agent to write its report: root's home on the login host
(``main``), where the agent works and the verifier runs; no Harbor mount needed."""
DIAGNOSIS_FILE = "diagnosis.json"
"""the grade, in the verifier's output directory beside reward.json and checks.json."""


def instruction_md(scenario: Scenario) -> str:
    """The scenario's words, then how to hand over a report (optional: it is graded apart)."""
    login = login_of(scenario).name
    peers = [h.name for h in scenario.hosts if h.name != login]
    names = f"`{login}`" + (
        f"; its peers, reached with `ssh NAME`: {', '.join(f'`{p}`' for p in peers)}" if peers else ""
    )
    return (
        scenario.instruction.rstrip("\n")
        + "\n\n---\n\n"
        + f"Optionally, say what was wrong: write a JSON report to `{REPORT_PATH}` before you finish,\n"
        + 'e.g. `{"healthy": false, "findings": [{"host": "web", "component": "service:nginx",\n'
        + '"cause": "config_error", "evidence": "nginx -t: unknown directive"}]}`. A host is named\n'
        + f"as the report knows it: this server is {names}. A component is `KIND:TARGET`:\n"
        + "`service:nginx`, `file:/etc/nginx/nginx.conf`, `fs:/var/log`, `process:PID`, `port:80`,\n"
        + "`table:DB.TABLE`, `cron:NAME`, `firewall:CHAIN`, `link:IFACE`. A cause is one of\n"
        + ", ".join(f"`{c}`" for c in CAUSES)
        + ".\nThe report is graded on its own; it does not change the repair's score.\n"
    )


def truths_json(faults: list[InjectedFault]) -> list[dict[str, Any]]:
    """The ground truth as spec.json carries it: one ``fixos.diagnosis.Truth`` per fault, as
    fields (the verifier builds the Truth back: ``templates/verify_task.py``)."""
    return [
        {
            "host": t.host,
            "type": t.type,
            "cause": t.cause,
            "component": t.component,
            "components": sorted(t.components),
            "identities": list(t.identities),
        }
        for t in truths(faults)
    ]


def solve_lines(faults: list[InjectedFault]) -> str:
    """solve.sh's report: the ground truth, as FixOS's oracle reports it."""
    text = json.dumps(truth_report(truths(faults)), indent=2, sort_keys=True)
    return (
        "# The reference diagnosis too (FixOS's oracle reports the ground truth): graded into\n"
        f"# /logs/verifier/{DIAGNOSIS_FILE}, apart from the reward.\n"
        f"cat > {REPORT_PATH} <<'FIXOS_REPORT'\n{text}\nFIXOS_REPORT\n"
    )
