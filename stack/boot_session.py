"""Where a host's first sessions come from on an engine of this machine: the harness's
from its boot's listener, the agent's from the harness's (``fixos.shells.boot``: a fork in
the host each); elsewhere, engine execs.

``FIXOS_BOOT_SESSION=0`` opens both by exec everywhere (the way of before, for A/B figures).
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import shlex
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.errors import ShellError
from ..shells.base import CLEAN_ENV, Shell
from ..shells.boot import BootShell, Pipes
from ..shells.session import SESSION_COMMAND
from .host_files import HostFiles, open_dir_in_root

if TYPE_CHECKING:  # it imports this module
    from .hosts import LiveHost

log = logging.getLogger(__name__)

INIT = "/usr/local/sbin/fixos-init"
"""the host's first program where its boot listens (``images/server``); it becomes init."""


def forks_sessions() -> bool:
    """Whether first sessions are forked in the hosts where they can be (``FIXOS_BOOT_SESSION``)."""
    return os.environ.get("FIXOS_BOOT_SESSION") != "0"


def boot_command(local: bool) -> list[str] | None:
    """The command a host starts with: ``INIT`` on an engine of this machine, else the
    image's own (``/sbin/init``): a listener no one here can reach would only wait."""
    return [INIT] if local and forks_sessions() else None


def first_session(host: LiveHost, api: Any, listening: bool) -> Shell:
    """``host``'s first session (``api``: its engine's ``docker.APIClient``): through the boot's
    listener when it started with one (``listening``) and this machine holds its root, else
    by exec. A listener that does not answer is told to go (through the exec), so nothing of
    it stays in the host."""
    files = host.local_files() if listening else None
    if files is not None:
        try:
            root = f"/proc/self/fd/{files.root_fd}"
            shell = BootShell(api, host.handle.container_id, root, read=_reader(files))
            host.boot_sessions.add(shell.pid)
            shell.on_end(lambda: host.boot_sessions.discard(shell.pid))
            return shell
        except ShellError as exc:
            log.warning("host %s: %s; its first session is an engine exec", host.name, exc)
    shell = host.shell()
    if listening:
        shell.run("pkill -x -f fixos-harness; rm -rf /run/fixos-harness", timeout=10)
    return shell


HAND_SECONDS = 5.0
"""how long the handed-over shell may take to open its end of the FIFOs."""


def handed_over(harness: Shell, host: LiveHost, api: Any) -> Shell:
    """A new session on ``host`` started by the harness's own session there,
    for the agent: a fork in the host, no engine exec. The harness starts a clean shell
    (the environment and directory a new session has) on two FIFOs in the host's /run, in a
    session of its own; this machine opens them through the host's root (resolved inside it)
    and removes them. The shell becomes init's child once the harness's session ends.
    ShellError where it cannot be had (the caller opens an exec on first use instead)."""
    files = host.local_files()
    if files is None:
        raise ShellError(f"this machine does not hold host {host.name}'s root")
    where = f"/run/fixos-hand-{secrets.token_hex(8)}"
    words = " ".join(f"{k}={shlex.quote(v)}" for k, v in CLEAN_ENV.items())
    spawn = harness.run(
        f"if mkdir -m 700 {where} && mkfifo -m 600 {where}/in {where}/out; then "
        f"{{ cd /root; exec env -i {words} {SESSION_COMMAND} >{where}/out 2>&1 <{where}/in; }} "
        "</dev/null >/dev/null 2>&1 & echo $!; fi",
        timeout=10,
    )
    shell_pid = spawn.output.strip().splitlines()[-1] if spawn.ok and spawn.output.strip() else ""
    try:
        if not shell_pid.isdigit():
            said = spawn.output.strip()[-200:]
            raise ShellError(f"the harness could not start a shell to hand over: {said}")
        to_shell, from_shell = _open_fifos(files.root_fd, where)
        pipes = Pipes(to_shell, from_shell)
        root = f"/proc/self/fd/{files.root_fd}"
        shell = BootShell(api, host.handle.container_id, root, stream=lambda: pipes, read=_reader(files))
    except (OSError, ShellError) as exc:
        harness.run(f"kill -KILL {shell_pid or 0} 2>/dev/null; rm -rf {where}", timeout=10)
        raise ShellError(f"no session handed over on {host.name}: {exc}") from None
    host.boot_sessions.add(shell.pid)
    shell.on_end(lambda: host.boot_sessions.discard(shell.pid))
    return shell


def _reader(files: HostFiles) -> Callable[[str], bytes | None]:
    """A small file of the host, read inside its root (``HostFiles.read``): None if none."""
    return lambda path: files.read(path, 64)


def _open_fifos(root_fd: int, where: str) -> tuple[int, int]:
    """This machine's ends of the FIFOs in ``where`` (inside the host's root), then both
    removed. The shell opens what it writes first, then what it reads: once the second
    opens here (ENXIO until the shell waits on it), it holds both, and nothing it opens by
    name is left to remove under it."""
    directory = open_dir_in_root(root_fd, where)
    try:
        deadline = time.monotonic() + HAND_SECONDS
        flags = os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
        from_shell = os.open("out", os.O_RDONLY | flags, dir_fd=directory)
        while True:
            try:
                to_shell = os.open("in", os.O_WRONLY | flags, dir_fd=directory)
                break
            except OSError as exc:
                if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                    os.close(from_shell)
                    raise
                time.sleep(0.002)
        for name in ("in", "out"):
            os.unlink(name, dir_fd=directory)
    finally:
        os.close(directory)
    parent = open_dir_in_root(root_fd, os.path.dirname(where))
    try:
        os.rmdir(os.path.basename(where), dir_fd=parent)
    finally:
        os.close(parent)
    return to_shell, from_shell
