"""Run one of a host's own programs through the engine, with no shell: a fresh
``docker exec`` of an argument vector, bounded by a deadline this process keeps.

For what only the host's program can tell (a daemon's test of its own
configuration: ``nginx -t``). It runs in the host, with the host's rights and
in its cgroup, never in the verifier's inspector: code the configuration names
(a PHP extension, a MariaDB plugin, an nginx module) then gains nothing it
did not have. Whether the program is the packaged one is the engine's diff's to
prove (the ``programs_unchanged`` gate).
"""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Callable
from typing import Any

from docker.errors import DockerException

from ..core.models import CommandResult
from ..core.readiness import readable
from ..shells.base import TIMEOUT_EXIT_CODE

OUTPUT_LIMIT = 16 * 1024


def run_program(
    api: Any,
    container_id: str,
    argv: list[str],
    *,
    timeout: float = 20.0,
    stdout: bool = True,
    on_output: Callable[[bytes], None] | None = None,
) -> CommandResult:
    """``argv`` run as root in the container; its output (stderr, and stdout unless
    ``stdout`` is False), capped. Exit 124 when it outlived ``timeout`` (it is left
    to die with the host), 126 when the engine could not start it (a host out of
    PIDs, a program gone): the program's failure, never an exception. ``on_output``
    sees each piece of output as it comes (when it came is what some callers time)."""
    command = " ".join(argv)
    started = time.monotonic()
    try:
        exec_id = api.exec_create(container_id, argv, stdout=stdout, stderr=True, tty=False)["Id"]
        raw = api.exec_start(exec_id, socket=True)
    except DockerException as exc:
        return CommandResult(command, f"cannot start: {exc}"[:400], 126, time.monotonic() - started)
    sock = getattr(raw, "_sock", raw)
    frames, output, timed_out = bytearray(), bytearray(), False
    try:
        while True:
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                timed_out = True
                break
            if not readable(sock, left):
                continue
            chunk = sock.recv(65536)
            if not chunk:
                break
            frames += chunk
            while len(frames) >= 8:
                _stream, size = struct.unpack(">BxxxL", frames[:8])
                if len(frames) < 8 + size:
                    break
                if len(output) < OUTPUT_LIMIT:
                    output += frames[8 : 8 + size]
                if on_output is not None:
                    on_output(bytes(frames[8 : 8 + size]))
                del frames[: 8 + size]
    except OSError as exc:
        output += f"\n[the engine's stream broke: {exc}]".encode()
    finally:
        with contextlib.suppress(Exception):
            raw.close()
    text = output[:OUTPUT_LIMIT].decode("utf-8", "replace")
    elapsed = time.monotonic() - started
    if timed_out:
        return CommandResult(command, text, TIMEOUT_EXIT_CODE, elapsed, timed_out=True)
    return CommandResult(command, text, _exit_code(api, exec_id), elapsed)


def _exit_code(api: Any, exec_id: str) -> int:
    for _ in range(40):  # the stream ends a moment before the engine records the exit
        with contextlib.suppress(DockerException):
            info = api.exec_inspect(exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                return 126 if code is None else int(code)
        time.sleep(0.025)
    return 126
