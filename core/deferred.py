"""A module imported where it is first used, not where it is named.

docker-py imports paramiko (and paramiko imports invoke) when docker is imported, for ssh://
engines only: ~60 ms of every ``fixos`` command's start, before its first container, on a
local engine that never speaks SSH. ``defer("paramiko")`` puts a stand-in in ``sys.modules``;
the first attribute anybody reads of it (``paramiko.SSHClient``) runs the real module in that
same object, so every ``import paramiko`` done meanwhile holds the real module afterwards.

Not ``importlib.util.LazyLoader``: on Python 3.11 ``import paramiko`` itself reads the module's
``__spec__`` (is it still initialising?), which loads a LazyLoader's module at once. The
stand-in has its ``__spec__``, ``__path__`` and ``__file__`` from the start and loads on any
other name.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import types
from typing import Any

_LOCK = threading.RLock()  # one load, whichever thread reads first; the others wait for it


class _Deferred(types.ModuleType):
    def __getattr__(self, name: str) -> Any:  # only for names the module does not hold yet
        with _LOCK:
            if type(self) is _Deferred and not getattr(self.__spec__, "_initializing", False):
                _load(self)
        return types.ModuleType.__getattribute__(self, name)


def _load(module: _Deferred) -> None:
    spec = module.__spec__
    spec._initializing = True  # as the import system marks a module it is running
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(spec.name, None)  # as a failed import: the next `import` tries again
        raise
    finally:
        spec._initializing = False
    module.__class__ = types.ModuleType  # loaded: no more detour through __getattr__


def defer(name: str) -> None:
    """Stand in for the top-level module ``name`` until it is used; nothing when it is already
    imported or not installed (its import then fails where it is named, as before)."""
    if name in sys.modules or "." in name:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    module = _Deferred(name)
    module.__spec__ = spec
    module.__loader__ = spec.loader
    module.__file__ = spec.origin
    module.__package__ = name if spec.submodule_search_locations is not None else ""
    if spec.submodule_search_locations is not None:
        module.__path__ = list(spec.submodule_search_locations)
    sys.modules[name] = module
