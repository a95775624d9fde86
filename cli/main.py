"""fixos: the command line. The parser lives here; each command is a module of this package
(catalog, episodes, validate, serving) making a few calls into the phase modules."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import io
import os
import signal
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import NoReturn

from docker.errors import DockerException
from rich.console import Console

from ..bench.local import default_parallelism
from ..core.errors import FixOSError, SetupFailed
from ..scenarios.schema import SCENARIO_DIR
from ..views.console import make_console
from .calibrate import cmd_calibrate, parse_levels
from .catalog import cmd_clean, cmd_list, cmd_setup, cmd_show_scenario
from .common import (
    DEFAULT_RESULTS,
    UsageError,
    docker_host_option,
    max_episodes_option,
    parse_seeds,
    port,
    positive,
    shard,
)
from .episodes import cmd_bench, cmd_play, cmd_run, cmd_schema, cmd_show, cmd_verify
from .export_run import add_parser as add_export_run
from .export_run import cmd_export_run
from .serving import cmd_export, cmd_serve
from .validate import cmd_validate
from .view import cmd_compare, cmd_view

__all__ = ["COMMANDS", "build_parser", "main", "parse_seeds"]

ERROR_EXIT = 2
"""a bad command line, a bad scenario file, no engine: anything but a score."""
LONGEST_ERROR = 1000


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad command line raises (main prints one line, exit 2) instead of
    printing the usage and exiting from inside parse_args."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("fixos").strip()
        raise UsageError(f"{command + ': ' if command else ''}{message} (see {self.prog} --help)")


def installed_version() -> str:
    """The installed distribution's version (pyproject.toml's), or why there is none."""
    try:
        return metadata.version("fixos")
    except metadata.PackageNotFoundError:
        return "(not installed: run from a source tree without `pip install`)"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fixos", description="Benchmark agents that repair real broken servers.")
    parser.add_argument("--version", action="version", version=f"fixos {installed_version()}")
    parser.add_argument(
        "--scenario-dir",
        type=Path,
        default=SCENARIO_DIR,
        help="where the scenario YAML files are (default: the bundled scenarios/)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    setup = sub.add_parser("setup", help="make sure the engine answers and the host images are built")
    docker_host_option(setup)
    listing = sub.add_parser("list", help="list the scenarios (with an id: show that one)")
    listing.add_argument("scenario", nargs="?", help="show this scenario, as show-scenario does")
    listing.add_argument(
        "--generated", type=int, metavar="LEVEL", help="list generated worlds of LEVEL (1-5): ids gen:LEVEL:N"
    )
    listing.add_argument("--count", type=int, default=10, help="how many generated worlds (default 10)")
    listing.add_argument(
        "--split", choices=("train", "dev", "test"), help="only generated worlds of this split"
    )
    show_scenario = sub.add_parser(
        "show-scenario",
        help="a scenario's hosts, named faults, solutions and checks, inherited gates expanded",
    )
    show_scenario.add_argument("scenario")

    run = sub.add_parser("run", help="run one episode and show its verdict")
    run.add_argument("scenario")
    run.add_argument("--agent", default="oracle", help="agent name (default: oracle)")
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--transport", choices=["exec", "ssh"], default="exec", help="the agent's shell")
    run.add_argument(
        "--task",
        choices=["repair", "diagnose", "localise", "detect"],
        default="repair",
        help="repair (default), or report only and touch nothing: diagnose, localise, detect",
    )
    run.add_argument("--results", type=Path, default=DEFAULT_RESULTS)

    play = sub.add_parser("play", help="a terminal on the broken host for you; scored when you exit")
    play.add_argument("scenario")
    play.add_argument("--seed", type=int, default=1)
    play.add_argument("--transport", choices=["exec", "ssh"], default="exec", help=argparse.SUPPRESS)
    play.add_argument("--results", type=Path, default=DEFAULT_RESULTS)

    verify = sub.add_parser("verify", help="tell a waiting `run --agent external` to score now")
    verify.add_argument("run", help="the run id it printed")
    verify.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    verify.add_argument(
        "--report", type=Path, help="your diagnosis (JSON, `fixos schema report`): graded beside the repair"
    )
    schema = sub.add_parser("schema", help="print the JSON schema of a file FixOS reads")
    schema.add_argument("what", choices=["report"], help="report: an agent's diagnosis")

    show = sub.add_parser("show", help="replay an episode's transcript and verdict")
    show.add_argument("episode", help="RUN_ID/EPISODE, e.g. 20261129-120000-ab12/easy_1-s1-oracle")
    show.add_argument("--results", type=Path, default=DEFAULT_RESULTS)

    view = sub.add_parser(
        "view", help="write a run's page (index.html) anew and say where it is, or serve it"
    )
    view.add_argument("run", help="a run id under --results, or a run directory")
    view.add_argument(
        "--serve", action="store_true", help="serve the run directory on 127.0.0.1 and print the URL"
    )
    view.add_argument("--port", type=port, default=8700, help="with --serve (default: 8700)")
    view.add_argument("--results", type=Path, default=DEFAULT_RESULTS)

    add_export_run(sub)

    compare_runs = sub.add_parser(
        "compare", help="two runs side by side: per scenario, better, worse or same"
    )
    compare_runs.add_argument("a", help="run A (the reference): a run id or directory")
    compare_runs.add_argument("b", help="run B: a run id or directory")
    compare_runs.add_argument("--html", type=Path, metavar="OUT", help="also write the comparison as a page")
    compare_runs.add_argument("--results", type=Path, default=DEFAULT_RESULTS)

    bench = sub.add_parser("bench", help="run scenarios x seeds x agents and print a table")
    bench.add_argument("--scenarios", nargs="*", help="ids or difficulties (default: all)")
    bench.add_argument("--seeds", type=parse_seeds, default="1", help="e.g. 1-3 (default: 1)")
    max_episodes_option(bench)
    bench.add_argument("--agent", action="append", help="repeatable (default: baseline)")
    bench.add_argument(
        "-j",
        "--jobs",
        type=positive,
        default=default_parallelism(),
        help=f"episodes at a time (default here: {default_parallelism()}, from cores and free memory)",
    )
    bench.add_argument("--transport", choices=["exec", "ssh"], default="exec", help="the agents' shell")
    bench.add_argument(
        "--task",
        choices=["repair", "diagnose", "localise", "detect"],
        default="repair",
        help="repair (default), or report only and touch nothing: diagnose, localise, detect",
    )
    bench.add_argument("--resume", metavar="RUN_ID", help="finish an interrupted run; its plan is kept")
    bench.add_argument("--shard", type=shard, help="i/n: only this deterministic share of the jobs")
    bench.add_argument("--compare", type=Path, metavar="SUMMARY", help="exit 2 on a regression against it")
    bench.add_argument("--tolerance", type=float, default=0.05, help="allowed drop in mean reward")
    bench.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    docker_host_option(bench)
    bench.add_argument(
        "--ray",
        metavar="auto|ADDRESS",
        help="run each episode as a Ray task on a node of this cluster (auto: RAY_ADDRESS or the one "
        "`ray start` began here); a node offers the fixos_engine resource, one unit per episode at a "
        "time, and uses its own engine (DOCKER_HOST of its `ray start`); needs fixos[ray]",
    )

    validate = sub.add_parser(
        "validate", help="prove scenarios sound: oracle 1.0, nop 0.0, partial in between"
    )
    validate.add_argument("scenarios", nargs="*", help="ids or difficulties (default: all)")
    validate.add_argument("--seeds", type=parse_seeds, default="1-3", help="default: 1-3")
    max_episodes_option(validate)
    validate.add_argument(
        "--adversaries", action="store_true", help="also run every cheating strategy: each must score <= 0.2"
    )
    validate.add_argument(
        "-j",
        "--jobs",
        type=positive,
        default=default_parallelism(),
        help=f"episodes at a time (default here: {default_parallelism()}, from cores and free memory)",
    )
    validate.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    docker_host_option(validate)

    calibrate = sub.add_parser(
        "calibrate", help="solve rates of agents that try over generated worlds, per level, with intervals"
    )
    calibrate.add_argument("--levels", type=parse_levels, default="1-5", help="e.g. 3 or 1-5 (default: 1-5)")
    calibrate.add_argument("--count", type=int, default=40, help="worlds per level (default: 40)")
    calibrate.add_argument("--split", choices=("train", "dev", "test"), help="only worlds of this split")
    calibrate.add_argument(
        "--agent", action="append", help="repeatable (default: baseline and first-fixes:1, the budget oracle)"
    )
    calibrate.add_argument("--seeds", type=parse_seeds, default="1", help="default: 1")
    calibrate.add_argument("--markdown", type=Path, help="also write the table to this file")
    calibrate.add_argument("--plot", type=Path, help="also write the plot (SVG) to this file")
    max_episodes_option(calibrate)
    calibrate.add_argument("-j", "--jobs", type=positive, default=default_parallelism())
    calibrate.add_argument("--results", type=Path, default=DEFAULT_RESULTS)
    docker_host_option(calibrate)

    export = sub.add_parser("export", help="write scenarios x seeds as task directories of another harness")
    export.add_argument("out", type=Path, help="output directory (one task directory per scenario x seed)")
    export.add_argument("--format", choices=["harbor"], default="harbor")
    export.add_argument("--scenarios", nargs="*", help="ids or difficulties (default: all)")
    export.add_argument("--seeds", type=parse_seeds, default="1", help="e.g. 1-3 (default: 1)")
    max_episodes_option(export)

    clean = sub.add_parser("clean", help="remove every container and network FixOS left behind")
    clean.add_argument("--run", help="only this run id")
    docker_host_option(clean)

    serve = sub.add_parser("serve", help="serve the scenarios over OpenEnv (HTTP + WebSocket) on 127.0.0.1")
    serve.add_argument("--port", type=port, default=8000)
    serve.add_argument("--max-sessions", type=positive, default=8, help="sessions at a time (default: 8)")
    serve.add_argument(
        "--session-timeout",
        type=float,
        default=900.0,
        help="seconds without a request before a session and its containers are removed (default: 900)",
    )
    serve.add_argument(
        "--warm",
        type=int,
        default=1,
        help="booted hosts of each kind kept ready once the first session resets, so a reset does not wait "
        "for a boot (default: 1; 0 boots one per reset)",
    )
    serve.add_argument(
        "--prepare-ahead",
        type=int,
        default=0,
        metavar="N",
        help="episodes reset ahead of time for the rows a trainer announces (POST /prepare), at most N "
        "at once (default: 0, announcements refused)",
    )
    return parser


COMMANDS = {
    "setup": cmd_setup,
    "list": cmd_list,
    "show-scenario": cmd_show_scenario,
    "run": cmd_run,
    "bench": cmd_bench,
    "validate": cmd_validate,
    "calibrate": cmd_calibrate,
    "play": cmd_play,
    "verify": cmd_verify,
    "schema": cmd_schema,
    "show": cmd_show,
    "view": cmd_view,
    "export-run": cmd_export_run,
    "compare": cmd_compare,
    "export": cmd_export,
    "clean": cmd_clean,
    "serve": cmd_serve,
}


def _terminate(signum: int, frame: object) -> None:
    # SIGTERM unwinds like Ctrl-C, so every `finally` removes its containers.
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None, console: Console | None = None) -> int:
    """Run one command. Its own exit code stands (a low score is not an error); an error, from the
    command line or the command, is one line ``fixos: ...`` on stderr and exit 2, never a traceback."""
    console = console or make_console()  # off a terminal (CI logs), lines are not cut at 80 columns
    errors = make_console(stderr=True, soft_wrap=True)
    try:
        args = build_parser().parse_args(argv)
        signal.signal(signal.SIGTERM, _terminate)
        return COMMANDS[args.command](args, console)
    except KeyboardInterrupt:
        errors.print("interrupted; containers of this run removed")
        return 130
    except SetupFailed as exc:  # the one line, then the last lines the step wrote to its log
        first, *tail = exc.report()
        code = _error(errors, first)
        for line in tail:
            errors.print(line, markup=False, highlight=False, emoji=False)
        return code
    except FixOSError as exc:
        return _error(errors, str(exc))
    except DockerException as exc:
        return _error(errors, f"the Docker engine refused: {exc}")
    except OSError as exc:
        return _error(errors, f"{exc.filename or 'system'}: {exc.strerror or exc}")
    except Exception as exc:  # a bug: still one line, with the way to see where
        if os.environ.get("FIXOS_TRACEBACK"):
            raise
        return _error(errors, f"unexpected {type(exc).__name__}: {exc} (FIXOS_TRACEBACK=1 shows where)")


_BUFFERED = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom, io.BufferedRWPair)
"""what may hold written data not yet passed to the system."""


def entry() -> NoReturn:
    """The ``fixos`` program: ``main``, then out without the interpreter's teardown, which frees
    every module and object one by one (~0.25 s after a bench, for a process that ends anyway).
    What must happen at exit still does: other threads are waited for (with any alive, the
    usual exit is taken), atexit's functions run, and every file still open is flushed."""
    code = main()
    others = [t for t in threading.enumerate() if t is not threading.current_thread()]
    if any(t.is_alive() and not t.daemon for t in others):
        sys.exit(code)
    try:
        atexit._run_exitfuncs()
        for handle in gc.get_objects():
            if isinstance(handle, _BUFFERED):  # concrete types: io.IOBase, an ABC, took 33 ms here
                with contextlib.suppress(Exception):  # closed, detached or a broken pipe
                    handle.flush()
    finally:
        os._exit(code)


def _error(errors: Console, message: str) -> int:
    line = " ".join(message.split())
    if len(line) > LONGEST_ERROR:
        line = f"{line[: LONGEST_ERROR - 3]}..."
    errors.print(f"fixos: {line}", markup=False, highlight=False)
    return ERROR_EXIT


if __name__ == "__main__":
    sys.exit(main())
