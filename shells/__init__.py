"""Shell sessions on a target host: one interface, several transports."""

from .base import DEFAULT_TIMEOUT, OUTPUT_LIMIT, Shell
from .fake import FakeShell
from .recording import RecordingShell

__all__ = ["DEFAULT_TIMEOUT", "OUTPUT_LIMIT", "FakeShell", "RecordingShell", "Shell"]
