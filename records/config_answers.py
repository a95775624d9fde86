"""Daemons' config-test answers kept on disk, so that a test is run once per image and
contents, not once per run.

``fixos.verifier.config_tests`` lends MariaDB's and PHP-FPM's answers from one host to
another of the same image under a key that names the image's layers on this machine and
a digest of everything the test reads (``fixos.stack.contents``): equal keys, equal
answers. Kept only in the judge's memory, every run, ``fixos run`` and OpenEnv server
paid again for the first host's tests: an engine exec and ~0.1 CPU-s (``mariadbd --help
--verbose``, ``php-fpm8.2 -t``) at its first reset. The key holds across processes as it
does across hosts (layers are never rewritten in place: a rebuilt image has new ones),
so the answers are kept beside the healthy baselines (``fixos.records.baselines``), one
file each, under a name that digests the key with the code that runs and keys the tests:
changed code finds nothing. Nothing inside a host can reach the directory.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator, MutableMapping
from pathlib import Path

from .baselines import cache_dir, code_digest

log = logging.getLogger(__name__)

KEPT_FILES = 4096
"""answers kept on disk at most: a fault's seeded edit makes each episode's own key, seen
again only when that seed is run again; past this, the oldest go."""


def answers_dir() -> Path:
    return cache_dir().parent / "config-answers"


class ConfigAnswers(MutableMapping[str, str]):
    """Key -> answer: what this process learnt (a dict, iterated and trimmed as one), and
    behind it the answers kept on disk, read once per key asked."""

    def __init__(self, root: Path | None = None) -> None:
        self._root = root or answers_dir()
        self._memory: dict[str, str] = {}

    def _path(self, key: str) -> Path:
        name = hashlib.sha256(f"{code_digest()}\0{key}".encode()).hexdigest()
        return self._root / f"{name}.json"

    def _from_disk(self, key: str) -> str | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("ignoring a kept config-test answer: %s", exc)
            return None
        if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("answer"), str):
            return None
        return data["answer"]

    def __getitem__(self, key: str) -> str:
        if key in self._memory:
            return self._memory[key]
        found = self._from_disk(key)
        if found is None:
            raise KeyError(key)
        self._memory[key] = found
        return found

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            self[key]
        except KeyError:
            return False
        return True

    def __setitem__(self, key: str, answer: str) -> None:
        self._memory[key] = answer
        path = self._path(key)
        if not path.is_file():
            self._write(path, {"key": key, "answer": answer})

    def __delitem__(self, key: str) -> None:
        """Forgotten by this process only (its memory is trimmed so); the disk keeps it."""
        del self._memory[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._memory)

    def __len__(self) -> int:
        return len(self._memory)

    def _write(self, path: Path, record: dict[str, str]) -> None:
        """A directory that cannot be written costs only the next run's time."""
        tmp = None
        try:
            self._root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self._root, prefix=".answer-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f)
            os.replace(tmp, path)
            tmp = None
            self._trim()
        except OSError as exc:
            log.warning("cannot keep a config-test answer in %s: %s", self._root, exc)
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def _trim(self) -> None:
        files = list(self._root.glob("*.json"))
        if len(files) <= KEPT_FILES:
            return

        def age(path: Path) -> float:
            try:
                return path.stat().st_mtime
            except OSError:  # gone meanwhile (another process trimmed it)
                return 0.0

        for old in sorted(files, key=age)[: len(files) - KEPT_FILES]:
            with contextlib.suppress(OSError):
                old.unlink()
