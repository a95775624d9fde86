"""The Shell contract every transport keeps."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..core.models import CommandResult

DEFAULT_TIMEOUT = 30.0
"""seconds a command may run before it is killed; the session survives."""

OUTPUT_LIMIT = 64 * 1024
"""bytes of output kept per command; the rest is dropped behind a visible marker."""

TIMEOUT_EXIT_CODE = 124

CLEAN_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "USER": "root",
    "LOGNAME": "root",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
}
"""the environment a command of ours runs in, whatever the caller's: a session's bash, and
an exported task's verifier (which has this module vendored, not the sessions)."""


def truncation_marker(omitted: int) -> str:
    return f"\n[fixos: output truncated, {omitted} more bytes not shown]\n"


def timeout_marker(timeout: float) -> str:
    return f"\n[fixos: command killed after {timeout:g}s timeout]\n"


@runtime_checkable
class Shell(Protocol):
    """A persistent session: cwd and exported variables survive between commands."""

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        """Run ``command`` through bash; never raises for the command's own failure.

        Safe to call from several threads (the verifier's checks do): the
        commands then run one after another."""
        ...

    def close(self) -> None: ...
