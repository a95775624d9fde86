"""Healthy baselines kept on disk, so that a host's healthy state is recorded once per
image, topology and verifier, not once per run.

A reset without a baseline judges the freshly booted hosts (every check records its
evidence, and every check must pass) before it injects anything: about a second a
scenario, paid again by every run, test module and OpenEnv server. Warm hosts of one
image are identical when booted (the pool's in-memory cache already relies on it), so
what they record is a function of:
- the checks (names, types, hosts, parameters), which include the inherited gates;
- the hosts' specs (roles, services, limits: the topology);
- the images (by id: a rebuilt image is another image);
- the code that records the evidence: every module of the installed ``fixos`` package
  (a changed check, probe or vantage must record anew; hashing all of it cannot miss one).

The file name is the digest of all of these, so a stale record is never read: it is
simply not found. Files are written whole (a temporary file renamed into place); one
that does not read as a JSON object is ignored and written again. The directory is
``$FIXOS_CACHE_DIR/baselines`` or ``$XDG_CACHE_HOME/fixos/baselines`` (``~/.cache``).
Nothing inside a host can reach it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FORMAT = 2
"""the layout of a record; a new one never reads an older one (it is part of the key). 2: a
record per check, so scenarios that share checks on the same hosts (every inherited gate;
generated worlds, each new) share their evidence."""


def cache_dir() -> Path:
    explicit = os.environ.get("FIXOS_CACHE_DIR")
    if explicit:
        return Path(explicit) / "baselines"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fixos" / "baselines"


PACKAGES = ("fixos", "fixos.core", "fixos.shells", "fixos.scenarios", "fixos.stack", "fixos.verifier")
"""where the code that records a healthy host lives (each a folder of its own once installed)."""


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of every Python module of the packages that record evidence (name and content)."""
    folders = []
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        places = (spec.submodule_search_locations or []) if spec is not None else []
        folders.extend((package, Path(p).resolve()) for p in places)
    return folders_digest(folders)


def folders_digest(folders: list[tuple[str, Path]]) -> str:
    """A digest of the ``*.py`` files below each (name, folder), by relative path and content."""
    digest = hashlib.sha256()
    for name, root in sorted(set(folders)):
        for path in sorted(root.rglob("*.py")):
            digest.update(f"{name}/{path.relative_to(root)}".encode() + b"\0")
            with contextlib.suppress(OSError):
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def baseline_key(checks: Any, hosts: Any, image_ids: dict[str, str], code: str | None = None) -> str:
    """The name of the record of this (checks, topology, images) under this code."""
    material = json.dumps(
        {
            "format": FORMAT,
            "checks": checks,
            "hosts": hosts,
            "images": image_ids,
            "code": code or code_digest(),
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(material.encode()).hexdigest()


class BaselineStore:
    """Healthy baselines on disk, by ``baseline_key``."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_dir()

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("ignoring the healthy baseline %s: %s", self._path(key), exc)
            return None
        return data if isinstance(data, dict) else None

    def find(
        self, checks: Any, hosts: Any, image_ids: dict[str, str], memory: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """Each check's key (by its name, ``checks`` being ``(name, type, host, params)``) and
        the evidence already recorded for it with these hosts and images: from ``memory`` (a
        pool's), else from disk. A check with none is left out of the evidence."""
        keys = {check[0]: baseline_key([check], hosts, image_ids) for check in checks}
        found: dict[str, Any] = {}
        for name, key in keys.items():
            kept = memory.get(key) if memory is not None else None
            record = kept if kept is not None else self.get(key)
            if record is not None and name in record:
                found[name] = record[name]
        return keys, found

    def keep(
        self, keys: dict[str, str], baseline: dict[str, Any], memory: dict[str, Any] | None = None
    ) -> None:
        """Each check's evidence of ``baseline`` in ``memory`` (a pool's), and on disk unless there."""
        for name, key in keys.items():
            if name not in baseline:
                continue
            record = {name: baseline[name]}
            if memory is not None:
                memory[key] = record
            if not self._path(key).is_file():
                self.put(key, record)

    def put(self, key: str, baseline: dict[str, Any]) -> None:
        """Keep ``baseline``; a directory that cannot be written costs only the next run's time."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".baseline-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(baseline, f, sort_keys=True)
            os.replace(tmp, self._path(key))
        except (OSError, TypeError, ValueError) as exc:
            log.warning("cannot keep a healthy baseline in %s: %s", self.root, exc)
            with contextlib.suppress(NameError, OSError):
                os.unlink(tmp)
