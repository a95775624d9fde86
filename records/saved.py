"""Saved files as pydantic models with a schema version: written by ``model_dump_json``,
read back by ``model_validate_json``, and a file that does not fit (garbage, another
version, missing fields) is one ``RecordError`` line naming the file and line."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from ..core.errors import RecordError

M = TypeVar("M", bound="Saved")

_READING = {"reading": True}
"""validation context of a file read back: only then must the version be there and match."""


class Saved(BaseModel):
    """A saved format. A subclass that changes its shape redeclares ``schema_version: int = N+1``:
    the default is the version it writes and the only one it reads."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = 1

    @classmethod
    def reads_version(cls) -> int:
        return cls.model_fields["schema_version"].default

    @model_validator(mode="before")
    @classmethod
    def _known_version(cls, data: Any, info: ValidationInfo) -> Any:
        if not (info.context or {}).get("reading") or not isinstance(data, dict):
            return data
        found, wanted = data.get("schema_version"), cls.reads_version()
        if found == wanted:
            return data
        if found is None:
            problem = f"no schema_version (written by an older FixOS; this one reads version {wanted})"
        elif isinstance(found, int) and found > wanted:
            problem = f"schema_version {found} is newer than this FixOS reads ({wanted}): upgrade FixOS"
        else:
            problem = f"schema_version {found!r}, but this FixOS reads version {wanted}"
        raise PydanticCustomError("schema_version", "{problem}", {"problem": problem})


def _one_line(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    problem = f"{where}: {first['msg']}" if where else first["msg"]
    if len(errors) > 1:
        problem += f" (and {len(errors) - 1} more problem(s))"
    return " ".join(problem.split())


def parse(cls: type[M], text: str, path: Path, line: int | None = None) -> M:
    try:
        return cls.model_validate_json(text, context=_READING)
    except ValidationError as exc:
        raise RecordError(str(path), f"not a valid {cls.__name__}: {_one_line(exc)}", line) from None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(str(path), f"cannot read it ({exc})") from None


def read_model(cls: type[M], path: Path) -> M:
    return parse(cls, _read_text(path), path)


def read_lines(cls: type[M], path: Path) -> list[M]:
    """Every non-blank line of a .jsonl file, as ``cls``. A last line without its
    newline is a write cut off by a kill (appends end with one), not a record:
    it is left out, and the next append replaces it."""
    text = _read_text(path)
    if not text.endswith("\n"):
        text = text[: text.rfind("\n") + 1]
    return [parse(cls, line, path, n) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


class Journal(Generic[M]):
    """A .jsonl file that only grows (``append_line``), read as ``read_lines`` reads it but
    parsing only the lines appended since the last read. A run's page is rewritten at every
    episode's start and end: parsed whole each time, its journal cost ~0.2 ms a record, so
    ~0.2 CPU-s a write at 640 records and ~100 CPU-s over such a run. A file replaced or cut
    shorter than what was read is read again from its start."""

    def __init__(self, cls: type[M], path: Path) -> None:
        self.cls, self.path = cls, path
        self._items: list[M] = []
        self._offset = 0
        self._lines = 0
        self._file: tuple[int, int] | None = None

    def read(self) -> list[M]:
        try:
            with self.path.open("rb") as f:
                stat = os.fstat(f.fileno())
                if (stat.st_dev, stat.st_ino) != self._file or stat.st_size < self._offset:
                    self._items, self._offset, self._lines = [], 0, 0
                    self._file = (stat.st_dev, stat.st_ino)
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            self._items, self._offset, self._lines, self._file = [], 0, 0, None
            return []
        except OSError as exc:
            raise RecordError(str(self.path), f"cannot read it ({exc})") from None
        whole = chunk[: chunk.rfind(b"\n") + 1]  # a torn last line is no record (``read_lines``)
        try:
            text = whole.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordError(str(self.path), f"cannot read it ({exc})") from None
        fresh, lines = [], self._lines
        for line in text.splitlines():
            lines += 1
            if line.strip():
                fresh.append(parse(self.cls, line, self.path, lines))  # raises before anything is kept
        self._items += fresh
        self._lines, self._offset = lines, self._offset + len(whole)
        return list(self._items)


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line that lacks its newline, so a new line never continues it."""
    try:
        with path.open("rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            f.seek(0)
            keep = f.read().rfind(b"\n") + 1
            f.truncate(keep)
    except FileNotFoundError:
        return


def write_model(path: Path, model: Saved) -> None:
    path.write_text(model.model_dump_json(indent=2) + "\n", encoding="utf-8")


def write_lines(path: Path, models: Iterable[Saved]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for model in models:
            f.write(model.model_dump_json() + "\n")


def append_line(path: Path, model: Saved) -> None:
    """Append one line and make it durable before returning: a journal line means done."""
    _drop_torn_tail(path)
    with path.open("a", encoding="utf-8") as f:
        f.write(model.model_dump_json() + "\n")
        f.flush()
        os.fsync(f.fileno())
