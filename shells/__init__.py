"""Shell sessions on a target host: one interface, several transports."""

from fixos.shells.base import DEFAULT_TIMEOUT, OUTPUT_LIMIT, Shell
from fixos.shells.fake import FakeShell
from fixos.shells.recording import RecordingShell

__all__ = ["DEFAULT_TIMEOUT", "OUTPUT_LIMIT", "FakeShell", "RecordingShell", "Shell"]
