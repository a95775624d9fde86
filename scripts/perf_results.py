"""Where the perf scripts leave what they measured: ``results/<name>.json`` at the
checkout's root, stamped with the time it was written."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def write_results(name: str, results: dict[str, Any]) -> Path:
    """``results`` and the time as ``results/<name>.json``; where it was written."""
    out = ROOT / "results" / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({**results, "when": time.time()}, indent=2) + "\n")
    return out
