"""Export scenarios as tasks of other harnesses: ``export_harbor`` writes Harbor task directories."""

from exporter.capture import Capture, CaptureShell, capture
from exporter.harbor import ExportError, export_harbor, write_task

__all__ = ["Capture", "CaptureShell", "ExportError", "capture", "export_harbor", "write_task"]
