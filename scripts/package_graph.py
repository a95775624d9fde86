"""Which FixOS package imports which: one "package -> imported packages" line each.

    .venv/bin/python scripts/package_graph.py [--modules]

The packages are those of pyproject.toml's package-dir map (top-level folder ->
``fixos.<stage>``). Every ``import`` of every .py file under them counts,
wherever it sits: a lazy import inside a function is still a dependency, and so
is one under ``if TYPE_CHECKING:`` (it names the other package's types).
tests/test_layers.py holds the rules this graph must keep.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

BASE = ["fixos.core"]
STAGES = [
    "fixos.shells",
    "fixos.injector",
    "fixos.injector.recipes",
    "fixos.verifier",
    "fixos.diagnosis",
    "fixos.agents",
    "fixos.records",
    "fixos.scenarios",
    "fixos.stack",
]
ORCHESTRATION = [
    "fixos.episodes",
    "fixos.bench",
    "fixos.views",
    "fixos.training",
    "fixos.server",
    "fixos.exporter",
    "fixos.cli",
    "fixos",
]
"""Each list runs from the bottom up: a room imports only rooms before it (``fixos`` itself,
the public API, is the top). ``fixos.images`` holds data and imports nothing."""


def floors() -> list[str]:
    """Every layered room, bottom first."""
    return [*BASE, *STAGES, *ORCHESTRATION]


@dataclass(frozen=True)
class Import:
    importer: str
    """the importing module, e.g. fixos.episodes.episode"""
    imported: str
    """the imported module (or the package an imported name lives in)"""
    file: str
    """the importing file, relative to the repository"""
    line: int

    def where(self) -> str:
        return f"{self.file}:{self.line}"


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """pyproject.toml's package-dir map: package -> its folder."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = config["tool"]["setuptools"]["package-dir"]
    return {package: root / folder for package, folder in mapping.items()}


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of every mapped package: dotted name -> file."""
    dirs = package_dirs(root)
    found: dict[str, Path] = {}
    for package, folder in dirs.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def package_of(module: str, packages: list[str]) -> str | None:
    """The mapped package a module belongs to (the longest matching prefix)."""
    owners = [p for p in packages if module == p or module.startswith(p + ".")]
    return max(owners, key=len) if owners else None


def _imports_of(module: str, path: Path, known: dict[str, Path], root: Path) -> Iterator[Import]:
    file = str(path.relative_to(root))
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):  # every import, at any depth: function bodies included
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, file, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                # ``from fixos import core`` imports a package; ``from fixos.x import f`` a name of fixos.x
                child = f"{source}.{alias.name}"
                yield Import(module, child if child in known else source, file, node.lineno)


def imports(root: Path = ROOT) -> list[Import]:
    """Every import of a FixOS module by a FixOS module."""
    known = modules(root)
    found = []
    for module, path in known.items():
        for imp in _imports_of(module, path, known, root):
            if imp.imported == "fixos" or imp.imported.startswith("fixos."):
                found.append(imp)
    return found


def package_graph(root: Path = ROOT) -> dict[str, dict[str, list[Import]]]:
    """package -> imported package -> the imports that make the edge (no self-edges)."""
    packages = list(package_dirs(root))
    graph: dict[str, dict[str, list[Import]]] = {p: {} for p in packages}
    for imp in imports(root):
        source = package_of(imp.importer, packages)
        target = package_of(imp.imported, packages)
        if source is None or target is None or source == target:
            continue
        graph[source].setdefault(target, []).append(imp)
    return graph


def cycles(graph: dict[str, dict[str, list[Import]]]) -> list[list[str]]:
    """The strongly connected groups of more than one package (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def _order(package: str) -> tuple[int, str]:
    layers = [BASE, STAGES, ORCHESTRATION]
    for rank, layer in enumerate(layers):
        if package in layer:
            return rank, f"{layer.index(package):02d}"
    return len(layers), package


def main(argv: list[str]) -> int:
    graph = package_graph()
    show_modules = "--modules" in argv
    for package in sorted(graph, key=_order):
        targets = sorted(graph[package], key=_order)
        print(f"{package} -> {', '.join(targets) if targets else '(nothing of fixos)'}")
        if show_modules:
            for target in targets:
                importers = sorted({imp.importer for imp in graph[package][target]})
                print(f"    {target}: {', '.join(importers)}")
    found = cycles(graph)
    for group in found:
        print(f"CYCLE: {' <-> '.join(group)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
