"""The agent's sessions in a multi-host episode: one per host, opened on first use.

Used as a Shell, it is the session on the scenario's login host (``ep.shell.run``,
as with a single host); called, it is a named host's (``ep.shell("db")``)::

    with fixos.episode("split_1") as ep:
        ep.shell.run("ssh db hostname")       # from the login host
        ep.shell("db").run("service mariadb status")
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..agents import Endpoints
from ..core.errors import FixOSError, ShellError
from ..core.models import CommandResult
from ..shells.base import Shell
from ..shells.boot import BootShell
from ..stack.boot_session import forks_sessions, handed_over
from ..stack.hosts import LiveHost
from .phases import end_sessions

log = logging.getLogger(__name__)


HANDED_END_SECONDS = 2.0
"""how long a closed session's shell may take to exit (ms, unless the agent replaced it
with a program that ignores its input: that one is then judged as left running)."""


class AgentShells:
    def __init__(self, hosts: Callable[[], Mapping[str, LiveHost]], login: str, transport: str) -> None:
        self._hosts = hosts
        """the stack's hosts, read at each opening (a pool hands the episode its stack at reset)."""
        self.login = login
        self._transport = transport
        self._open: dict[str, Shell] = {}

    def __call__(self, host: str | None = None) -> Shell:
        """The session on ``host`` (default: the login host), opened on first use."""
        name = host or self.login
        if name not in self._open:
            hosts = self._hosts()
            if name not in hosts:
                raise FixOSError(f"no host named {name!r} in this episode (hosts: {', '.join(hosts)})")
            live = hosts[name]
            self._open[name] = live.shell() if self._transport == "exec" else live.ssh_shell()
        return self._open[name]

    def succeed(self, harness: Mapping[str, Shell], api: Any) -> None:
        """Take over from the harness once the faults are confirmed: its session on the login
        host starts this one there (``fixos.stack.boot_session.handed_over``: a fork in the
        host, not an engine exec, where this machine holds the host's root; else an exec on
        first use, as over SSH), then every session of the harness ends (``end_sessions``)."""
        host = self._hosts().get(self.login)
        shell = harness.get(self.login)
        here = host is not None and shell is not None and host.reads_locally
        if self._transport == "exec" and here and forks_sessions():
            try:
                self._open[self.login] = handed_over(shell, host, api)
            except ShellError as exc:
                log.warning("%s; the agent's session there is an engine exec", exc)
        end_sessions(harness)

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        return self().run(command, timeout=timeout)

    def close(self) -> None:
        """Close every session; one a harness handed over is waited for until its shell
        exited (init's child: what it left running is then judged, ``nothing_new_running``)."""
        shells, self._open = list(self._open.values()), {}
        for shell in shells:
            with contextlib.suppress(Exception):
                shell.close()
        for shell in shells:
            if isinstance(shell, BootShell):
                with contextlib.suppress(ShellError):
                    shell.end(HANDED_END_SECONDS)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self(), name)  # what a transport offers beyond run/close


def endpoints_of(host: LiveHost, workdir: Path | None, others: list[str]) -> Endpoints:
    """How an agent of its own reaches ``host``: ssh with a key made for the episode, or docker exec."""
    key_dir = workdir or Path(tempfile.mkdtemp(prefix="fixos-key-"))
    key = host.write_key(key_dir / "id_episode")
    return Endpoints(
        ssh=host.ssh_command(key),
        docker_exec=host.exec_command(),
        key_path=str(key),
        host=host.name,
        others=others,
    )
