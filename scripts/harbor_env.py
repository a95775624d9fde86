"""Harbor itself, in an environment of its own, run on exported FixOS tasks.

Harbor (https://github.com/laude-institute/harbor) needs Python >= 3.12; FixOS runs
on 3.11. Its own virtual environment (``.venv/harbor``: inside FixOS's own, so that a
package check that reads the source tree, such as ``openenv validate``, skips its
links) is made from the first
Python >= 3.12 found (``HARBOR_PYTHON``, then ``python3.13``/``python3.12`` on PATH,
then pyenv's versions), at a pinned version (``HARBOR_VERSION`` overrides it).
Tasks run through ``harbor run`` with Harbor's local Docker environment (which
needs ``docker compose``: ``scripts/ensure-compose``), and the verdicts are read
from the trial results Harbor writes, not recomputed here.

Used by ``scripts/harbor_check.py`` (``make harbor-check``) and ``scripts/perf.py``.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from subprocess import STDOUT

from fixos.core.errors import FixOSError, SetupFailed
from fixos.stack.setup_log import DEFAULT_PATH, SETUP_LOG_ENV, SetupLog
from fixos.stack.sources import pip_build_options

ROOT = Path(__file__).resolve().parent.parent
HARBOR_VERSION = "0.26.0"
"""the newest release PyPI served on 2026-12-01; ``HARBOR_VERSION`` tries another."""
VENV = ROOT / ".venv" / "harbor"
MIN_PYTHON = (3, 12)


class HarborError(FixOSError):
    """Harbor cannot be set up or run here; the message is one line saying why."""


def _version_of(python: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        return int(out[0]), int(out[1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def find_python(env: dict[str, str] | None = None) -> str:
    """A Python >= 3.12 for Harbor's environment, or a HarborError naming where it looked."""
    env = dict(os.environ) if env is None else env
    if env.get("HARBOR_PYTHON"):
        got = _version_of(env["HARBOR_PYTHON"])
        if got is None or got < MIN_PYTHON:
            raise HarborError(f"HARBOR_PYTHON={env['HARBOR_PYTHON']} is not a Python >= 3.12 (got {got})")
        return env["HARBOR_PYTHON"]
    pyenv = Path(env.get("PYENV_ROOT", str(Path.home() / ".pyenv")))
    candidates = [shutil.which(name) for name in ("python3.14", "python3.13", "python3.12")]
    candidates += sorted(glob.glob(str(pyenv / "versions" / "3.1[2-9]*" / "bin" / "python3")), reverse=True)
    for python in filter(None, candidates):
        got = _version_of(python)
        if got is not None and got >= MIN_PYTHON:
            return python
    raise HarborError(
        "Harbor needs Python >= 3.12 and none was found (looked for python3.12-3.14 on PATH and under "
        f"{pyenv}/versions); install one or set HARBOR_PYTHON=/path/to/python3.12"
    )


def installed_version(venv: Path = VENV) -> str | None:
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    done = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('harbor'))"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_harbor(
    version: str = HARBOR_VERSION, venv: Path = VENV, say=print, log: SetupLog | None = None
) -> Path:
    """The ``harbor`` executable of ``venv`` at ``version``, installing it when missing; venv's
    and pip's output go to the set-up log, whose last lines a failure carries."""
    if installed_version(venv) == version:
        return venv / "bin" / "harbor"
    python = find_python()
    log = log or SetupLog(os.environ.get(SETUP_LOG_ENV) or ROOT / DEFAULT_PATH)
    where = venv.relative_to(ROOT) if venv.is_relative_to(ROOT) else venv
    say(f"[setup] harbor: installing Harbor {version} into {where} with {python} (first run only)")
    pip = [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", f"harbor=={version}"]
    steps = [("venv", [python, "-m", "venv", "--clear", str(venv)], 300), ("pip", pip, 900)]
    try:
        for what, command, timeout in steps:
            with log.step(f"harbor: {what}", " ".join(command)) as out:
                try:
                    done = subprocess.run(
                        command, stdout=out, stderr=STDOUT, stdin=subprocess.DEVNULL, timeout=timeout
                    )
                except subprocess.TimeoutExpired:
                    raise log.failed("harbor", f"{what} took over {timeout} s") from None
                if done.returncode != 0:
                    raise log.failed("harbor", f"{what} could not install harbor=={version} into {where}")
    except SetupFailed as failed:
        raise HarborError("\n".join(failed.report())) from None
    return venv / "bin" / "harbor"


def harbor_env(base_image: str) -> dict[str, str]:
    """The environment ``harbor run`` gets: the variables the exported compose file names
    (base image, pip options for the verifier's build), the builder that reuses FixOS's
    layers, and no model-price download."""
    env = dict(os.environ)
    env.setdefault("FIXOS_BASE_IMAGE", base_image)
    env.setdefault("FIXOS_PIP_OPTIONS", pip_build_options())
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the network here reaches no GitHub
    # Compose's classic builder, which reuses the layers of the server image FixOS built
    # (BuildKit keeps a cache of its own and would install every package again: ~2 min
    # of a cold CI's 5). The image is the same either way; the user may set it to 1.
    env.setdefault("DOCKER_BUILDKIT", "0")
    return env


@dataclass(frozen=True)
class HarborTrial:
    """One trial as Harbor recorded it (``<job>/<trial>/result.json``)."""

    task: str
    agent: str
    trial: str
    reward: float | None
    """None: Harbor recorded no reward (the trial raised)."""
    exception: str | None
    checks_failed: tuple[str, ...] = ()
    """the exported verifier's failing checks (its checks.json), for a row that went wrong."""
    diagnosis: float | None = None
    """the agent's report graded (the verifier's diagnosis.json: ``exporter.report``); None: no file."""


def _failed_checks(trial_dir: Path) -> tuple[str, ...]:
    path = trial_dir / "verifier" / "checks.json"
    try:
        return tuple(c["name"] for c in json.loads(path.read_text()) if not c.get("passed"))
    except (OSError, ValueError, TypeError, KeyError):
        return ()


def _diagnosis(trial_dir: Path) -> float | None:
    try:
        return float(json.loads((trial_dir / "verifier" / "diagnosis.json").read_text())["score"])
    except (OSError, ValueError, TypeError, KeyError):
        return None


def read_job(job_dir: Path) -> list[HarborTrial]:
    """Every trial of a finished Harbor job, as Harbor wrote it."""
    trials = []
    for path in sorted(job_dir.glob("*/result.json")):
        data = json.loads(path.read_text())
        rewards = (data.get("verifier_result") or {}).get("rewards") or {}
        exception = data.get("exception_info")
        trials.append(
            HarborTrial(
                task=data["task_name"],
                agent=data["agent_info"]["name"],
                trial=data["trial_name"],
                reward=rewards.get("reward"),
                exception=(exception or {}).get("exception_type") if exception else None,
                checks_failed=_failed_checks(path.parent),
                diagnosis=_diagnosis(path.parent),
            )
        )
    return trials


def read_metrics(job_dir: Path) -> dict[str, dict]:
    """agent -> Harbor's own metrics of a finished job (its ``result.json``: the mean
    reward, pass@k), as Harbor computed them from the reward files."""
    stats = json.loads((job_dir / "result.json").read_text()).get("stats", {})
    found = {}
    for key, value in (stats.get("evals") or {}).items():
        agent = key.split("__", 1)[0]
        mean = (value.get("metrics") or [{}])[0].get("mean")
        found[agent] = {"mean": mean, "pass_at_k": value.get("pass_at_k") or {}}
    return found


def run_job(
    harbor: Path,
    tasks: Path,
    *,
    agents: list[str],
    attempts: int,
    concurrent: int,
    env: dict[str, str],
    jobs_dir: Path,
    job_name: str,
    log: Path,
) -> list[HarborTrial]:
    """``harbor run`` of every task directory under ``tasks`` with each agent, ``attempts``
    times, ``concurrent`` trials at a time, as one job; Harbor's output goes to ``log``."""
    config = {
        "job_name": job_name,
        "jobs_dir": str(jobs_dir),
        "n_attempts": attempts,
        "n_concurrent_trials": concurrent,
        "agents": [{"name": agent} for agent in agents],
        "datasets": [{"path": str(tasks)}],
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(config, handle)
    try:
        with log.open("ab") as out:
            done = subprocess.run(
                [str(harbor), "run", "-c", handle.name, "--yes", "--quiet"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                stdin=subprocess.DEVNULL,
            )
    finally:
        os.unlink(handle.name)
    trials = read_job(jobs_dir / job_name)
    if done.returncode != 0 and not trials:
        raise HarborError(f"harbor run exited {done.returncode} with no trial recorded; see {log}")
    return trials
