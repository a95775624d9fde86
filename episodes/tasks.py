"""Task levels: what an episode asks of the agent, and what it scores.

- ``repair`` (the default): get the service back as it was; the reward is the verdict's.
  A report is optional and graded beside it (``diagnosis``).
- ``diagnose``, ``localise``, ``detect``: look, say what is wrong, change nothing. The
  reward is the report's grade at that level (``fixos.diagnosis.grade``): everything
  (host, component, cause, identity), where only, or only whether anything is wrong.
  The host must be left as the agent found it: every gate still applies, the gate
  ``untouched`` (``fixos.verifier.untouched``) sees a service restarted or a file
  written, and every scored check that failed when the faults were confirmed must
  still fail (a repair, or a hog killed, is touching). Touching costs the whole score.

A fault-free **control** (a world with no fault) is judged the same way at every level:
nothing is broken, so the right repair is none (``untouched``) and the right report is
``healthy: true``. Such worlds are judged as left only: with nothing changed since a
healthy boot, there is nothing whose survival a restart could test (and a restart
would itself be the change the gate fails).
"""

from __future__ import annotations

from ..core.errors import FixOSError
from ..core.models import CheckResult, Verdict
from ..diagnosis.grade import LEVELS
from ..scenarios.schema import Scenario
from ..scenarios.steady import STEADY_PREFIX, steady_name
from ..verifier.untouched import UntouchedParams
from ..verifier.vantage import SERVICE_DAEMONS
from ..verifier.verify import CheckEntry, reward_of
from .durability import AS_LEFT

REPAIR = "repair"
CONTROL = "control"
"""a fault-free world's family in records and summaries."""
REPORT_ONLY = frozenset({"diagnose", "localise", "detect"})
AS_FOUND = "the symptoms are as the agent found them"

_ASKS = {
    "diagnose": "for each problem, the host, the component that is broken and the cause",
    "localise": "for each problem, the host and the component that is broken",
    "detect": "whether anything is wrong at all",
}


def task_level(name: str) -> str:
    if name not in LEVELS:
        raise FixOSError(f"--task must be one of {', '.join(LEVELS)} (got {name!r})")
    return name


def leaves_as_found(level: str, faults: int) -> bool:
    """Whether the episode wants the host left as the agent found it: a report-only
    level, or a world with nothing broken (a control)."""
    return level in REPORT_ONLY or faults == 0


def gates_settle(level: str) -> bool:
    """Whether a failed gate settles the final verdict at 0.0, so that the checks still
    waiting may stop (``Probe.settled``). Not at a report-only level: there a scenario's gate
    on a fault's effect fails as found, and every other check's own outcome is compared with
    the confirmation's (``symptoms_as_found``); a page cut short would read as broken since."""
    return level not in REPORT_ONLY


def instruction_for(level: str, instruction: str) -> str:
    """The scenario's words, and what the level asks instead of a repair."""
    if level not in REPORT_ONLY:
        return instruction
    return (
        instruction.rstrip()
        + "\n\nThis is a triage task: do NOT change anything on the servers (no restarts, no edits,"
        " no killed processes); changing anything scores 0. Look, then report "
        + _ASKS[level]
        + ' as JSON ({"healthy": false, "findings": [{"host": ..., "component": ..., "cause": ...,'
        ' "evidence": ...}]}; `fixos schema report` gives the schema), or {"healthy": true,'
        ' "findings": []} if nothing is wrong.\n'
    )


def untouched_entries(scenario: Scenario) -> list[CheckEntry]:
    """The gate ``untouched`` on each host, watching the services its healthy self ran."""
    return [
        CheckEntry(
            steady_name("the host is as the agent found it", host.name, len(scenario.hosts)),
            "untouched",
            host.name,
            False,
            1.0,
            UntouchedParams(services=[s for s in host.services if s in SERVICE_DAEMONS]),
        )
        for host in scenario.hosts
    ]


def symptoms_as_found(verdict: Verdict, confirmed: Verdict | None) -> CheckResult:
    """A gate: the checks judge the host as they did when the faults were confirmed. A scored
    check that failed then must fail still (a symptom repaired, a hog killed); any check
    that passed then must pass still (a gate the agent broke). A gate that failed then is
    left as it is: a scenario's own gate on a fault's effect (the data directory's owner)
    fails at both ends, and one that sees a fault's effect only now and then (a knock on a
    MariaDB whose connections a flood holds: medium_7, hard_4, split_3) may pass at the
    end; a repair that made it pass changed a file or a service (``untouched``)."""
    if confirmed is None:  # fail closed: nothing to compare with
        return CheckResult(f"{STEADY_PREFIX} {AS_FOUND}", "symptoms_as_found", False, False, 1.0, "no record")
    before = {c.name: c.passed for c in confirmed.checks}
    mended = sorted(c.name for c in verdict.checks if c.scored and before.get(c.name) is False and c.passed)
    broken = sorted(c.name for c in verdict.checks if before.get(c.name) is True and not c.passed)
    said = [
        *([f"repaired, which the task forbids: {'; '.join(mended)}"] if mended else []),
        *([f"broken since: {'; '.join(broken)}"] if broken else []),
    ]
    found = sum(1 for passed in before.values() if not passed)
    detail = "; ".join(said) or f"every check as found ({found} failing, as the faults left them)"
    return CheckResult(f"{STEADY_PREFIX} {AS_FOUND}", "symptoms_as_found", not said, False, 1.0, detail)


def as_found_verdict(verdict: Verdict, confirmed: Verdict | None, level: str) -> Verdict:
    """The final verdict of a host to be left as found: judged as left only, and at a
    report-only level compared check by check with the confirmation (``symptoms_as_found``)."""
    checks = list(verdict.checks)
    if level in REPORT_ONLY:
        checks.append(symptoms_as_found(verdict, confirmed))
    return Verdict(reward_of(checks), checks, phases={AS_LEFT: checks})


def report_reward(verdict: Verdict, diagnosis: float) -> float:
    """A report-only level's reward: the report's grade if the host is as the agent found it
    (every check as at the confirmation, ``untouched`` among them), else 0.0."""
    gate = next((c for c in verdict.checks if c.type == "symptoms_as_found"), None)
    return diagnosis if gate is not None and gate.passed else 0.0
