"""The judge's sessions on a host, as the checks of one judgement use them: a session that
remembers how it broke (``WatchedShell``), and several used as one shell (``SessionPool``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ..core.errors import ShellError
from ..core.models import CommandResult


class WatchedShell:
    """An inspector's session that remembers the first time it broke."""

    def __init__(self, shell: object | None, error: str | None = None) -> None:
        self._shell = shell
        self.error = error

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        if self._shell is None:
            raise ShellError(self.error or "no inspector")
        try:
            return self._shell.run(command, timeout)  # type: ignore[attr-defined]
        except ShellError as exc:
            self.error = self.error or str(exc)
            raise

    def close(self) -> None:
        if self._shell is not None:
            with contextlib.suppress(Exception):
                self._shell.close()  # type: ignore[attr-defined]


class SessionPool:
    """A host's sessions in the judge, used as one shell: each command goes to a free one,
    and a new one is opened (up to ``size``) when every one is busy. The checks of a
    judgement run side by side, and a session runs one command at a time: one session
    would queue them all. A session that does not open leaves the pool as it is (the
    command waits for a busy one); ``error`` is the first break of any of them."""

    def __init__(self, first: WatchedShell, open_more: Callable[[], WatchedShell], size: int) -> None:
        self._cond = threading.Condition()
        self._all = [first]
        self._free = [first]
        self._open_more = open_more
        self._size = size
        self._opening = 0

    @property
    def error(self) -> str | None:
        return next((s.error for s in self._all if s.error), None)

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        shell = self._take()
        try:
            return shell.run(command, timeout)
        finally:
            with self._cond:
                self._free.append(shell)
                self._cond.notify()

    def _take(self) -> WatchedShell:
        with self._cond:
            while not self._free:
                if len(self._all) + self._opening < self._size:
                    self._opening += 1
                    break
                self._cond.wait()
            else:
                return self._free.pop()
        try:
            shell: WatchedShell | None = self._open_more()
        except Exception:
            shell = None
        with self._cond:
            self._opening -= 1
            if shell is not None and shell.error is None:
                self._all.append(shell)
                return shell
            self._size = len(self._all)  # it would not open: make do with those that did
            while not self._free:
                self._cond.wait()
            return self._free.pop()

    def keep_answering(self, answers: Callable[[WatchedShell], bool]) -> bool:
        """Close every session that does not answer as itself; whether one is left."""
        with self._cond:
            shells, self._all, self._free = self._all, [], []
        # side by side: each answer also copies the host's name files again (about 8 ms)
        with ThreadPoolExecutor(max_workers=max(1, len(shells))) as asking:
            answered = list(asking.map(answers, shells))
        for shell, ok in zip(shells, answered, strict=True):
            if ok:
                self._all.append(shell)
            else:
                shell.close()
        self._free = list(self._all)
        return bool(self._all)

    def close(self) -> None:
        for shell in self._all:
            shell.close()
