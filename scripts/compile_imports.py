"""Byte-compile what FixOS and its tests import, once, at set-up.

pip installs with --no-compile (scripts/ensure-venv: compiling all ~900 MB of the
dependencies took 37 s of a fresh set-up). Python would compile a module when it is
first imported, but not where PYTHONDONTWRITEBYTECODE is set (as on CI machines):
there every `fixos` command and test process compiled its ~2,800 modules again, 1.1 s
of CPU before it did anything (`import fixos.bench.local`: 1.02 -> 0.46 s, measured).
So every FixOS module and what they, pytest and testinfra import is written here,
about 13 s; the rest of the dependencies stays uncompiled. Run by the venv's Python.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import py_compile
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ("pytest", "testinfra")
FIRST = ("paramiko",)
"""imported before FixOS: its command line defers paramiko (core/deferred.py), but every final
verdict's knock on sshd and every SSH session loads it, so it is compiled here all the same."""


def fixos_modules() -> list[str]:
    """Every module of the packages pyproject.toml installs (``__main__`` would run)."""
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    names = []
    for package in packages:
        module = importlib.import_module(package)
        names.append(package)
        for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
            if info.name != "__main__":
                names.append(f"{package}.{info.name}")
    return names


def main() -> int:
    failed = []
    for name in FIRST:  # before fixos_modules(), which imports the command line
        importlib.import_module(name)
    for name in [*fixos_modules(), *TOOLS]:
        try:
            importlib.import_module(name)
        except Exception as exc:  # an optional extra not installed: what it imports stays uncompiled
            failed.append(f"{name} ({type(exc).__name__})")
    sources = sorted(
        {
            m.__file__
            for m in list(sys.modules.values())
            if (getattr(m, "__file__", None) or "").endswith(".py")
        }
    )
    for source in sources:
        py_compile.compile(source, cfile=importlib.util.cache_from_source(source), doraise=False)
    print(f"compiled {len(sources)} modules" + (f"; not importable: {', '.join(failed)}" if failed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
