"""The verifier of an exported FixOS task, run inside the host by tests/test.sh.

It runs FixOS's own check classes (vendored beside this file, under lib/)
against this host: commands through local bash, HTTP to 127.0.0.1, files read
with open(). The other hosts of a multi-host task are judged over ssh with the
task's key (commands, files) and over the task's network (HTTP to their names).
The healthy baseline was recorded when the task was exported.

Usage: verify.py SPEC.json OUT_DIR -> OUT_DIR/reward.json (``{"reward": x}``
alone: Harbor computes pass@k only for a single key, and headlines the
alphabetically first of several), OUT_DIR/checks.json (each check's result
and evidence) and OUT_DIR/diagnosis.json (the agent's report, from the path the
instruction gave, graded against the faults' ground truth baked into the spec:
the fields of a FixOS record's ``diagnosis``). The report never changes the reward.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from fixos.core.models import CommandResult, HttpResponse
from fixos.shells.base import CLEAN_ENV, OUTPUT_LIMIT
from fixos.verifier.backend import testinfra_host
from fixos.verifier.base import CHECKS, Probe
from fixos.verifier.exits import wait_for_exits
from fixos.verifier.verify import CheckEntry, judge


class LocalShell:
    """Each command in a fresh bash with a clean environment, killed at its timeout."""

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        return self._spawn(command, timeout)

    def _spawn(self, command: str, timeout: float | None, own_errors: bool = False) -> CommandResult:
        """``command`` in bash, stderr with stdout as a terminal shows them; ``own_errors``:
        stderr is the launcher's own (ssh's), kept out of the output unless it failed (255)."""
        started = time.monotonic()
        proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if own_errors else subprocess.STDOUT,
            env=CLEAN_ENV,
            cwd="/root",
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout or 30)
            code, timed_out = proc.returncode, False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            code, timed_out = 124, True
        if own_errors and code == 255 and err:
            out += err
        text = out[:OUTPUT_LIMIT].decode("utf-8", "replace")
        return CommandResult(
            command, text, code, time.monotonic() - started, timed_out, len(out) > OUTPUT_LIMIT
        )

    def close(self) -> None:
        return None


SSH_FAILED = 255
SSH_TRIES = 3


class PeerShell(LocalShell):
    """Each command in a fresh bash on a peer host, over ssh with the task's key."""

    def __init__(self, host: str) -> None:
        self.host = host

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in CLEAN_ENV.items())
        # The command's stderr joins its stdout on the peer; what ssh itself says (a race
        # of parallel checks over known_hosts, a warning) stays out of what checks parse:
        # testinfra's `ss` parser once choked on it. UpdateHostKeys=no: no such race.
        remote = f"cd /root && env -i {env} bash --noprofile --norc -c {shlex.quote(command)} 2>&1"
        ssh = (
            "ssh -o BatchMode=yes -o ConnectTimeout=5 -o UpdateHostKeys=no "
            f"{shlex.quote(self.host)} {shlex.quote(remote)}"
        )
        # ssh's own failure (255: the connection timed out on a loaded machine) is asked
        # again: its empty output once read as "every listener of the peer gone".
        for _ in range(SSH_TRIES):
            result = self._spawn(ssh, timeout, own_errors=True)
            if result.exit_code != SSH_FAILED:
                break
        return dataclasses.replace(result, command=command)


class PeerAccess:
    """HTTP to a peer by its name on the task's network, files read over ssh."""

    def __init__(self, host: str) -> None:
        self.name = host
        self._shell = PeerShell(host)

    def http_get(self, port: int, path: str, timeout: float = 5.0) -> HttpResponse:
        return _get(f"http://{self.name}:{port}{path}", timeout)

    def read_file(self, path: str) -> bytes | None:
        result = self._shell.run(f"test -f {shlex.quote(path)} && base64 -w0 < {shlex.quote(path)}", 30)
        return base64.b64decode(result.output) if result.exit_code == 0 else None


def _get(url: str, timeout: float) -> HttpResponse:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return HttpResponse(resp.status, resp.read())
    except urllib.error.HTTPError as exc:
        return HttpResponse(exc.code, exc.read() or b"")
    except (OSError, urllib.error.URLError) as exc:
        reason = getattr(exc, "reason", exc)
        return HttpResponse(0, b"", f"{type(reason).__name__}: {reason}", isinstance(reason, TimeoutError))


@dataclasses.dataclass(frozen=True)
class SiteTls:
    """The site's HTTPS as the checks read it (``access.tls``): the CA's certificate from
    spec.json (recorded at export, out of the agent's reach), nginx's own port here."""

    name: str
    ca_pem: str
    port: int

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


class LocalAccess:
    """HTTP to this host's own port, files read directly."""

    name = "local"

    def __init__(self, tls: SiteTls | None = None) -> None:
        self.tls = tls

    def http_get(self, port: int, path: str, timeout: float = 5.0) -> HttpResponse:
        return _get(f"http://127.0.0.1:{port}{path}", timeout)

    def read_file(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except (IsADirectoryError, FileNotFoundError, NotADirectoryError, PermissionError):
            return None


def main(spec_path: str, out_dir: str) -> int:
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    entries = [
        CheckEntry(
            c["name"],
            c["type"],
            c["host"],
            c["scored"],
            c["weight"],
            CHECKS.get(c["type"]).Params(**c["params"]),
        )
        for c in spec["checks"]
    ]
    login = spec.get("login")
    site = spec.get("tls")  # the export refuses HTTPS on any other host than the login host
    tls = SiteTls(site["name"], site["ca_pem"], site["port"]) if site else None
    probes = {}
    for host in sorted({e.host for e in entries}):
        here = login is None or host == login
        shell = LocalShell() if here else PeerShell(host)
        access = LocalAccess(tls) if here else PeerAccess(host)
        probes[host] = Probe(testinfra_host(shell, host), shell, access, patient=True)
    wait_for_exits({host: probe.shell for host, probe in probes.items()})
    verdict = judge(entries, probes, spec["baseline"], moment="after").verdict
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    reward = {"reward": verdict.reward}
    details = [
        {"name": c.name, "passed": c.passed, "scored": c.scored, "weight": c.weight, "detail": c.detail}
        for c in verdict.checks
    ]
    (out / "checks.json").write_text(json.dumps(details, indent=2) + "\n", encoding="utf-8")
    (out / "reward.json").write_text(json.dumps(reward, indent=2) + "\n", encoding="utf-8")
    for c in verdict.checks:
        print(f"{'PASS' if c.passed else 'FAIL'} {c.name}{'' if c.scored else ' (gate)'}: {c.detail}")
    print(f"reward {verdict.reward}")
    if "truths" in spec:
        diagnosis = diagnose(spec)
        (out / "diagnosis.json").write_text(json.dumps(diagnosis, indent=2) + "\n", encoding="utf-8")
        said = diagnosis["error"] or diagnosis["source"]
        print(f"diagnosis {diagnosis['score']} ({said})")
    return 0


REPORT_LIMIT = 1 << 20
"""bytes of a report read: a Report holds at most 50 findings of 4,000 characters of evidence."""


def diagnose(spec: dict) -> dict:
    """The report at ``spec["report"]`` graded against ``spec["truths"]`` (FixOS's grading,
    vendored): one that does not parse scores 0.0 with one line naming the field. Whatever
    happens here, reward.json is already written."""
    blank = {"score": 0.0, "recall": 0.0, "precision": 0.0, "per_fault": [], "source": "none", "error": None}
    try:
        from fixos.diagnosis import grade, parse_report
        from fixos.diagnosis.report import ReportError
        from fixos.diagnosis.truth import Truth

        faults = [
            Truth(
                t["host"],
                t["type"],
                t["cause"],
                t["component"],
                frozenset(t["components"]),
                tuple(t["identities"]),
            )
            for t in spec["truths"]
        ]
        path = Path(spec["report"])
        text = None
        if path.is_file():
            with open(path, "rb") as f:
                data = f.read(REPORT_LIMIT + 1)
            if len(data) > REPORT_LIMIT:
                return {**blank, "source": "file", "error": f"{path}: larger than {REPORT_LIMIT} bytes"}
            text = data.decode("utf-8", "replace")
        source = "none" if text is None else "file"
        try:
            report = None if text is None else parse_report(text, where=str(path))
        except ReportError as exc:
            return {**blank, "source": source, "error": str(exc)}
        graded = grade(report, faults, "repair")
    except Exception as exc:  # the grading's own failure: said in the file, never the reward's
        return {**blank, "error": f"verifier: {type(exc).__name__}: {exc}"}
    return {
        "score": graded.score,
        "recall": graded.recall,
        "precision": graded.precision,
        "per_fault": graded.per_fault,
        "source": source,
        "error": None,
    }


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
