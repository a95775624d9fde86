"""Export scenarios as tasks of other harnesses: ``export_harbor`` writes Harbor task directories."""

from .capture import Capture, CaptureShell, capture
from .harbor import ExportError, export_harbor, write_task

__all__ = ["Capture", "CaptureShell", "ExportError", "capture", "export_harbor", "write_task"]
