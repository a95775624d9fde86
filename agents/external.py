"""Your own agent, or you: the broken host is reached with plain `ssh` or `docker exec`.

FixOS prints how to log in, then waits until you press Enter here or run
``fixos verify RUN_ID`` from another terminal; then it scores and tears down.
Commands typed over that SSH session are not in FixOS's transcript.
"""

from __future__ import annotations

import select
import sys
import time

from ..core.errors import FixOSError
from ..shells.base import Shell
from ..shells.stopping import check_stop
from .base import Task

VERIFY_REQUEST = "verify.request"


class ExternalAgent:
    name = "external"
    wants_endpoints = True

    def __init__(self, poll: float = 0.2) -> None:
        self._poll = poll

    def solve(self, task: Task, shell: Shell) -> None:
        if task.endpoints is None or task.workdir is None:
            raise FixOSError("the external agent needs endpoints and a results directory")
        run_id = task.workdir.parent.name
        print(f"\n{task.instruction.strip()}\n", flush=True)
        print(f"ssh:    {task.endpoints.ssh}", flush=True)
        print(f"exec:   {task.endpoints.docker_exec}", flush=True)
        if task.endpoints.others:
            others = ", ".join(task.endpoints.others)
            print(
                f"host:   both log you in on {task.endpoints.host!r}; from there `ssh NAME` reaches "
                f"the other hosts ({others}), e.g. ssh {task.endpoints.others[-1]}",
                flush=True,
            )
        print(f"When the host is repaired, press Enter here or run: fixos verify {run_id}", flush=True)
        request = task.workdir.parent / VERIFY_REQUEST
        deadline = time.monotonic() + task.wall_seconds
        stdin_open = sys.stdin is not None and not sys.stdin.closed
        while time.monotonic() < deadline:
            check_stop()  # Ctrl-C or SIGTERM: the bench is tearing down, stop waiting
            if request.exists():
                request.unlink(missing_ok=True)
                return
            if stdin_open:
                try:
                    ready, _, _ = select.select([sys.stdin], [], [], self._poll)
                except (OSError, ValueError):
                    stdin_open = False
                    continue
                if ready:
                    line = sys.stdin.readline()
                    if line == "":
                        stdin_open = False  # no terminal (e.g. CI): wait for `fixos verify`
                    else:
                        return
            else:
                time.sleep(self._poll)
        print("wall time is up: verifying", flush=True)
