"""A table from YAML ``type`` names to classes, imported only when first used."""

from __future__ import annotations

import importlib
from typing import Generic, TypeVar

from fixos.core.errors import UnknownTypeError

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> class, where a class may be given as ``"module:Class"`` and loads lazily.

    Open on purpose: plugins call ``register`` to add their own types.
    """

    def __init__(self, kind: str, entries: dict[str, str | type[T]] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, str | type[T]] = dict(entries or {})

    def register(self, name: str, cls: str | type[T]) -> None:
        self._entries[name] = cls

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def get(self, name: str) -> type[T]:
        try:
            entry = self._entries[name]
        except KeyError:
            raise UnknownTypeError(self.kind, name, self.names()) from None
        if isinstance(entry, str):
            module, _, attr = entry.partition(":")
            entry = getattr(importlib.import_module(module), attr)
            self._entries[name] = entry
        return entry
