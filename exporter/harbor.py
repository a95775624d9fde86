"""Write one Harbor task directory per scenario x seed, from a live capture.

Layout of a task (see Harbor's task format)::

    <scenario>-s<seed>/
      task.toml  instruction.md  README.md
      environment/  Dockerfile (FixOS's server image + verifier runtime + the break at boot),
                    docker-compose.yaml, rootfs/ (images/server/rootfs), task/ (boot scripts)
      solution/solve.sh
      tests/  test.sh, verify.py, spec.json (checks + healthy baseline + the faults' ground
              truth), lib/ (vendored checks and report grading)

Everything written is a function of the repository and the capture: no
timestamps, sorted JSON, so the same seed gives the same bytes.
"""

from __future__ import annotations

import importlib
import json
import shlex
import shutil
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

import docker

from ..core.errors import FixOSError
from ..scenarios.schema import Scenario
from ..shells.base import CLEAN_ENV
from ..stack.hosts import READY_PROBES
from ..stack.images import IMAGES_DIR
from ..stack.roles import ROLE_PROBES
from ..stack.tls import Validity
from ..verifier import CHECKS
from .capture import Capture, PinMissed, capture
from .compose import DISPATCH, compose_yaml, is_multi_host, login_of, ssh_files, wait_for_peers
from .pids import PID_OF
from .report import REPORT_PATH, instruction_md, solve_lines, truths_json
from .settle import settle_lines
from .tls import EXPORT_VALIDITY, hosts_line, verifier_record

TEMPLATES = Path(__file__).resolve().parent / "templates"
READY_MARKER = "/run/fixos-ready"
VERIFIER_VENV = "/opt/fixos-verifier"
# Modules the exported verifier needs, written under lib/ at their package paths.
VENDORED = ["fixos", "fixos.core", "fixos.core.errors", "fixos.core.models", "fixos.core.registry"]
VENDORED += ["fixos.shells.base", "fixos.shells.probes", "fixos.shells.tagged", "fixos.verifier"]
VENDORED += ["fixos.diagnosis", "fixos.injector.recipes"]  # grading the agent's report (``report``)
VERIFIER_PACKAGES = ("pydantic", "pytest-testinfra", "cryptography")
"""what the vendored checks import, pinned to the versions FixOS runs with."""
VERIFIER_TIMEOUT = 180.0
BUILD_TIMEOUT = 1800.0
STORAGE_MB = 10240


class ExportError(FixOSError):
    """A scenario that cannot become a Harbor task, or an output directory in the way."""


def task_name(scenario: Scenario, seed: int) -> str:
    return f"{scenario.slug}-s{seed}"


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)


def _json(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _toml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _wait_ready(what: str) -> str:
    return (
        f"# Wait until the host has broken itself at boot ({READY_MARKER}), then {what}.\n"
        f"for _ in $(seq 1 600); do [ -e {READY_MARKER} ] && break; sleep 0.2; done\n"
    )


# -- the files of one task ------------------------------------------------------


def task_toml(scenario: Scenario, seed: int) -> str:
    host = login_of(scenario)
    tags = sorted({"fixos", "troubleshooting", "sre", *scenario.tags, *scenario.fault_types})
    cpus = int(host.cpus) if float(host.cpus).is_integer() else host.cpus
    return "\n".join(
        [
            'schema_version = "1.0"',
            "",
            "[metadata]",
            'author_name = "FixOS"',
            f"difficulty = {_toml_str(scenario.difficulty)}",
            'category = "system-administration"',
            f"tags = [{', '.join(_toml_str(t) for t in tags)}]",
            f"title = {_toml_str(scenario.title)}",
            f"fixos_scenario = {_toml_str(scenario.id)}",
            f"fixos_seed = {seed}",
            "",
            "[verifier]",
            f"timeout_sec = {VERIFIER_TIMEOUT}",
            "",
            "[agent]",
            f"timeout_sec = {float(scenario.limits.wall_seconds)}",
            "",
            "[environment]",
            f"build_timeout_sec = {BUILD_TIMEOUT}",
            f"cpus = {cpus}",
            f"memory_mb = {host.memory_mb}",
            f"storage_mb = {STORAGE_MB}",
            "",
            "# The agent starts once the host has broken itself at boot.",
            "[environment.healthcheck]",
            f"command = {_toml_str(f'test -e {READY_MARKER}')}",
            "interval_sec = 1.0",
            "start_period_sec = 180.0",
            "start_interval_sec = 0.5",
            "retries = 3",
            "",
        ]
    )


def dockerfile() -> str:
    server = (IMAGES_DIR / "server" / "Dockerfile").read_text(encoding="utf-8")
    pins = " ".join(f"{name}=={metadata.version(name)}" for name in VERIFIER_PACKAGES)
    return (
        server.rstrip("\n")
        + f"""

# ---- Exported FixOS task: everything above is FixOS's server image, unchanged,
# so a machine that built it reuses those layers. Below: the verifier's runtime,
# then the fault, applied once at boot by the entrypoint. PIP_OPTIONS: e.g.
# --index-url for a mirror, or --trusted-host behind a TLS-rewriting proxy.
ARG PIP_OPTIONS=""
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 python3-venv \\
 && python3 -m venv {VERIFIER_VENV} \\
 && {VERIFIER_VENV}/bin/pip install $PIP_OPTIONS --no-cache-dir --disable-pip-version-check {pins} \\
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin

COPY task/ /

ENTRYPOINT ["/usr/local/sbin/fixos-boot"]
"""
    )


COMPOSE = """\
# Merged by Harbor into its own compose file: what every FixOS host gets. Harbor
# passes no build arguments; these come from the environment Harbor runs in.
services:
  main:
    build:
      args:
        BASE: ${{FIXOS_BASE_IMAGE:-debian:bookworm-slim}}
        PIP_OPTIONS: ${{FIXOS_PIP_OPTIONS:-}}
    tmpfs:
      - /var/log:size={log_mb}m,nr_inodes={inodes},mode=0755
    cap_add:
      - SYS_PTRACE
    pids_limit: {pids}
"""

BOOT = """\
#!/bin/sh
# PID 1 of this host. Whatever command the container was given (Harbor gives
# `sleep infinity`), boot the real init; the host breaks itself once, after boot.
if [ -x /usr/local/share/fixos/break-host ]; then
    setsid /usr/local/share/fixos/break-host </dev/null >/dev/null 2>&1 &
fi
exec /sbin/init
"""


def break_host(cap: Capture, name: str | None = None) -> str:
    """The script that breaks host ``name`` (default: the only one) at its boot."""
    host = next(h for h in cap.scenario.hosts if h.name == name) if name else cap.scenario.hosts[0]
    probes = [READY_PROBES[s] for s in host.services if s in READY_PROBES]
    if host.role in ROLE_PROBES:
        probes.append(ROLE_PROBES[host.role].format(name=shlex.quote(host.name)))
    ready = " && ".join(probes) or "true"
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(CLEAN_ENV.items()))
    faults = ", ".join(cap.scenario.fault_types)
    mine = [f for f in cap.faults if f.host == host.name]
    peers = wait_for_peers(cap.scenario, READY_MARKER) if is_multi_host(cap.scenario) else ""
    if peers and host.name != login_of(cap.scenario).name:
        peers = ""
    which = f" (host {host.name})" if is_multi_host(cap.scenario) else ""
    return (
        "#!/bin/bash\n"
        f"# Breaks this host{which} once, as FixOS broke {cap.scenario.id} with seed {cap.seed} ({faults}):\n"
        "# waits until the services answer, then runs the faults' commands in one session,\n"
        "# in the order FixOS ran them, and removes itself.\n"
        f"export {env}\n"
        "cd /root\n"
        f"for _ in $(seq 1 900); do {{ {ready}; }} >/dev/null 2>&1 && break; sleep 0.1; done\n"
        'rm -f "$0"\n'
        + (f"{hosts_line()}\n" if host.name in cap.sites else "")
        + "\n"
        + "\n".join(cap.commands[host.name])
        + "\n\n# Wait for what FixOS's confirmation waited for.\n"
        + _with_pid_of("".join(line + "\n" for line in settle_lines(mine)))
        + peers
        + f": > {READY_MARKER}\n"
    )


def solve_sh(cap: Capture) -> str:
    return (
        "#!/bin/bash\n"
        f"# FixOS's reference repair of {cap.scenario.id} for seed {cap.seed} (what its oracle runs).\n"
        + _wait_ready("repair it")
        + "set -euo pipefail\n"
        + solve_lines(cap.faults)
        + _with_pid_of(cap.solution.rstrip("\n") + "\n")
    )


def _with_pid_of(script: str) -> str:
    return PID_OF + script if "pid_of " in script else script


TEST_SH = f"""\
#!/bin/bash
# FixOS's checks of this host -> /logs/verifier/reward.json and checks.json; the agent's
# report, if any, graded -> /logs/verifier/diagnosis.json.
{_wait_ready("judge it").rstrip()}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p /logs/verifier
PYTHONPATH="$here/lib" exec {VERIFIER_VENV}/bin/python "$here/verify.py" "$here/spec.json" /logs/verifier
"""


def spec_json(cap: Capture) -> str:
    checks = [
        {
            "name": c.name,
            "type": c.type,
            "host": c.host,
            "scored": c.scored,
            "weight": c.weight,
            "params": c.params.model_dump(mode="json"),
        }
        for c in cap.checks
    ]
    return _json(
        {
            "scenario": cap.scenario.id,
            "seed": cap.seed,
            "login": login_of(cap.scenario).name,
            "checks": checks,
            # none for what an in-container verifier cannot judge (``Check.exported``)
            "baseline": {
                c.name: cap.baseline.get(c.name) if CHECKS.get(c.type).exported else None for c in cap.checks
            },
            **({"tls": verifier_record(next(iter(cap.sites.values())))} if cap.sites else {}),
            # the report's place and what it is graded against (``exporter.report``)
            "report": REPORT_PATH,
            "truths": truths_json(cap.faults),
        }
    )


def _module_files(name: str) -> list[tuple[str, Path]]:
    """(path under lib/, source file) of a module, or of every module of a package."""
    module = importlib.import_module(name)
    source = Path(module.__file__ or "")
    rel = name.replace(".", "/")
    if source.name != "__init__.py":
        return [(rel + ".py", source)]
    if name in ("fixos", "fixos.core"):
        return [(rel + "/__init__.py", source)]
    return [(f"{rel}/{p.name}", p) for p in sorted(source.parent.glob("*.py"))]


def _vendor(lib: Path) -> None:
    for name in VENDORED:
        for rel, source in _module_files(name):
            _write(lib / rel, source.read_text(encoding="utf-8"))
    _write(
        lib / "fixos" / "shells" / "__init__.py",
        '"""The Shell contract, vendored for the exported verifier."""\n',
    )
    _write(  # the recipes' tables only (the ground truth's vocabulary), not the fault types
        lib / "fixos" / "injector" / "__init__.py",
        '"""The recipes of the fault types, vendored for grading reports in the exported verifier."""\n',
    )


def _copy_tree(src: Path, dst: Path) -> None:
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        # as FixOS's own image build sees it (stack/images.py): only the exec bit counts, so
        # a checkout's umask or a file saved 0600 gives the task the modes FixOS's hosts had
        target.chmod(0o755 if path.stat().st_mode & 0o100 else 0o644)


def write_task(cap: Capture, out: Path) -> Path:
    """Write the task directory of one capture under ``out``; returns it."""
    scenario, host = cap.scenario, cap.scenario.hosts[0]
    task = out / task_name(scenario, cap.seed)
    if task.exists():
        shutil.rmtree(task)
    _write(task / "task.toml", task_toml(scenario, cap.seed))
    _write(task / "instruction.md", instruction_md(scenario))
    _write(task / "README.md", (TEMPLATES / "README.md").read_text(encoding="utf-8"))
    env = task / "environment"
    _write(env / "Dockerfile", dockerfile())
    _copy_tree(IMAGES_DIR / "server" / "rootfs", env / "rootfs")
    _write(env / "task" / "usr" / "local" / "sbin" / "fixos-boot", BOOT, 0o755)
    share = env / "task" / "usr" / "local" / "share" / "fixos"
    if is_multi_host(scenario):
        _write(env / "docker-compose.yaml", compose_yaml(scenario))
        _write(share / "break-host", DISPATCH, 0o755)
        for spec in scenario.hosts:
            _write(share / "break-host.d" / spec.name, break_host(cap, spec.name), 0o755)
        for path, (text, mode) in ssh_files(scenario, cap.seed).items():
            _write(env / "task" / path.lstrip("/"), text, mode)
    else:
        compose = COMPOSE.format(log_mb=host.log_disk_mb, inodes=host.log_disk_inodes, pids=host.pids)
        if host.tmp_disk_mb is not None:  # /tmp sized by the scenario: a tmpfs beside /var/log
            compose = compose.replace(
                "mode=0755\n", f"mode=0755\n      - /tmp:size={host.tmp_disk_mb}m,mode=1777\n", 1
            )
        _write(env / "docker-compose.yaml", compose)
        _write(share / "break-host", break_host(cap), 0o755)
    for site in cap.sites.values():  # the healthy /etc/ssl/shop; the CA's certificate goes to tests/
        if len(cap.sites) > 1 or site.host != login_of(scenario).name:
            raise ExportError(f"scenarios/{scenario.id}.yaml: HTTPS exports only on the login host")
        for path, (text, mode) in site.files.items():
            _write(env / "task" / path.lstrip("/"), text, mode)
    _write(task / "solution" / "solve.sh", solve_sh(cap), 0o755)
    tests = task / "tests"
    _write(tests / "test.sh", TEST_SH, 0o755)
    _write(tests / "verify.py", (TEMPLATES / "verify_task.py").read_text(encoding="utf-8"))
    _write(tests / "spec.json", spec_json(cap))
    _vendor(tests / "lib")
    return task


def check_exportable(scenario: Scenario) -> None:
    for i, spec in enumerate(scenario.hosts):
        if spec.image != "server":
            raise ExportError(
                f"scenarios/{scenario.id}.yaml: hosts[{i}].image: only the server image can be exported "
                f"(got {spec.image!r})"
            )


def export_harbor(
    scenarios: Sequence[Scenario],
    seeds: Sequence[int],
    out: Path,
    *,
    client: docker.DockerClient,
    images: dict[str, str],
    run_id: str,
    say: Callable[[str], None] = lambda line: None,
    tls_validity: Validity = EXPORT_VALIDITY,
) -> list[Path]:
    """Capture each scenario x seed on a live host and write its task under ``out``
    (``tls_validity``: when an HTTPS task's certificates are issued, and for how long)."""
    for scenario in scenarios:
        check_exportable(scenario)
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    _write(out / "README.md", (TEMPLATES / "README.md").read_text(encoding="utf-8"))
    written = []
    for scenario in scenarios:
        for seed in seeds:
            for attempt in (1, 2):
                try:
                    cap = capture(
                        scenario, seed, client=client, images=images, run_id=run_id, tls_validity=tls_validity
                    )
                    break
                except PinMissed as exc:  # another fork took the PID: as the bench, once more
                    if attempt == 2:
                        raise
                    say(f"{task_name(scenario, seed)}: {exc}; capturing again on a fresh host")
            written.append(write_task(cap, out))
            count = sum(len(c) for c in cap.commands.values())
            say(f"{task_name(scenario, seed)}: {count} commands break {len(cap.commands)} host(s)")
    return written
