"""You, at a terminal on the broken host (``fixos play``)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from ..core.errors import FixOSError
from ..shells.base import Shell
from .base import Task


class HumanAgent:
    name = "human"
    wants_endpoints = True

    def solve(self, task: Task, shell: Shell) -> None:
        if task.endpoints is None:
            raise FixOSError("play needs the host's endpoints")
        if shutil.which("docker") is None:
            raise FixOSError("play needs the docker command line client")
        print(f"\n{task.instruction.strip()}\n", flush=True)
        print("You are root on the broken host. Leave the shell (exit or Ctrl-D) to be scored.\n", flush=True)
        container = task.endpoints.docker_exec.split()[3]
        interactive = ["-it"] if sys.stdin.isatty() else ["-i"]
        subprocess.call(["docker", "exec", *interactive, container, "bash", "-l"])
