"""Shell sessions on a target host: one interface, several transports."""

from shells.base import DEFAULT_TIMEOUT, OUTPUT_LIMIT, Shell
from shells.fake import FakeShell
from shells.recording import RecordingShell

__all__ = ["DEFAULT_TIMEOUT", "OUTPUT_LIMIT", "FakeShell", "RecordingShell", "Shell"]
