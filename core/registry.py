"""A table from YAML ``type`` names to classes, keyed by what each class says it is."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Generic, TypeVar

from .errors import FixOSError, UnknownTypeError

T = TypeVar("T")


class RegistryError(FixOSError):
    """A class registered without a name, under a taken name, or under another name than its own."""


class Registry(Generic[T]):
    """Name -> class, where the name is the class's own ``key`` attribute (``type`` by default).

    ``register`` is a class decorator, so a type is spelled once, on its class.
    ``lazy`` maps names to ``"module:Class"`` for classes too costly to import
    up front; on first use the loaded class must carry that same name. Open on
    purpose: plugins call ``register`` to add their own types.
    """

    def __init__(
        self,
        kind: str,
        classes: Iterable[type[T]] = (),
        *,
        key: str = "type",
        lazy: Mapping[str, str] | None = None,
    ) -> None:
        self.kind, self.key = kind, key
        self._classes: dict[str, type[T]] = {}
        self._lazy: dict[str, str] = dict(lazy or {})
        for cls in classes:
            self.register(cls)

    def name_of(self, cls: type[T]) -> str:
        name = getattr(cls, self.key, None)
        if not isinstance(name, str) or not name:
            raise RegistryError(f"{self.kind} {cls.__qualname__}: no `{self.key}` name to register it under")
        return name

    def register(self, cls: type[T]) -> type[T]:
        """Add ``cls`` under its own name; returns it, to serve as a decorator."""
        name = self.name_of(cls)
        taken = self._classes.get(name)
        if (taken is not None and taken is not cls) or name in self._lazy:
            raise RegistryError(
                f"{self.kind} {name!r}: registered twice ({cls.__module__}.{cls.__qualname__})"
            )
        self._classes[name] = cls
        return cls

    def names(self) -> list[str]:
        return sorted({*self._classes, *self._lazy})

    def __contains__(self, name: object) -> bool:
        return name in self._classes or name in self._lazy

    def get(self, name: str) -> type[T]:
        if name in self._classes:
            return self._classes[name]
        if name not in self._lazy:
            raise UnknownTypeError(self.kind, name, self.names())
        module, _, attr = self._lazy[name].partition(":")
        cls = getattr(importlib.import_module(module), attr)
        if self.name_of(cls) != name:
            raise RegistryError(
                f"{self.kind} {name!r}: {self._lazy[name]} calls itself {self.name_of(cls)!r}"
            )
        del self._lazy[name]
        self._classes[name] = cls
        return cls
