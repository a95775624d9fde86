"""Where a host's first session comes from: its boot's listener on an engine of this
machine (``fixos.shells.boot``: a fork in the host), else an engine exec.

``FIXOS_BOOT_SESSION=0`` opens it by exec everywhere (the way of before, for A/B figures).
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ..core.errors import ShellError
from ..shells.base import Shell
from ..shells.boot import BootShell

log = logging.getLogger(__name__)

INIT = "/usr/local/sbin/fixos-init"
"""the host's first program where its boot listens (``images/server``); it becomes init."""


def boot_command(local: bool) -> list[str] | None:
    """The command a host starts with: ``INIT`` on an engine of this machine, else the
    image's own (``/sbin/init``): a listener no one here can reach would only wait."""
    return [INIT] if local and os.environ.get("FIXOS_BOOT_SESSION") != "0" else None


def first_session(host: Any, api: Any, listening: bool) -> Shell:
    """``host``'s first session (a ``LiveHost``; ``api``, its engine's): through the boot's
    listener when it started with one (``listening``) and this machine holds its root, else
    by exec. A listener that does not answer is told to go (through the exec), so nothing of
    it stays in the host."""
    files = host.local_files() if listening else None
    if files is not None:
        try:
            shell = BootShell(api, host.handle.container_id, f"/proc/self/fd/{files.root_fd}")
            host.boot_sessions.add(shell.pid)
            shell.on_end(lambda: host.boot_sessions.discard(shell.pid))
            return shell
        except ShellError as exc:
            log.warning("host %s: %s; its first session is an engine exec", host.name, exc)
    shell = host.shell()
    if listening:
        shell.run("pkill -x -f fixos-harness; rm -rf /run/fixos-harness", timeout=10)
    return shell
