"""The package layers hold: a base that imports nothing else of FixOS, stages above it,
orchestration on top, no cycle anywhere, and every module under 400 lines.

The graph comes from scripts/package_graph.py (the same one the closing notes print):
every import of every module counts, lazy ones inside functions included.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 400


def _load_graph_module():
    spec = importlib.util.spec_from_file_location("package_graph", ROOT / "scripts" / "package_graph.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


pg = _load_graph_module()

FORBIDDEN: list[tuple[str, str, str]] = [
    # (importer package, imported package or module, why)
    ("fixos.injector", "fixos.verifier", "faults and checks must stay independent"),
    ("fixos.verifier", "fixos.injector", "faults and checks must stay independent"),
    ("fixos.agents", "fixos.verifier", "an agent must not see how it is judged"),
    ("fixos.agents", "fixos.scenarios", "an agent must not see the solution or the checks"),
]


def violations(root: Path) -> list[str]:
    """Every broken layer rule of the tree at ``root``, one line each."""
    graph = pg.package_graph(root)
    orchestration = set(pg.ORCHESTRATION)
    found = [f"cycle between packages: {' <-> '.join(group)}" for group in pg.cycles(graph)]
    for source, targets in graph.items():
        for target, edge in targets.items():
            where = f"{edge[0].importer} imports {edge[0].imported} ({edge[0].where()})"
            if source in pg.BASE and target not in pg.BASE:
                found.append(f"the base layer {source} imports {target}: {where}")
            if source in pg.STAGES and target in orchestration:
                found.append(f"stage {source} imports orchestration {target}: {where}")
    for imp in pg.imports(root):
        source = pg.package_of(imp.importer, list(graph))
        for importer, imported, why in FORBIDDEN:
            if source == importer and (imp.imported == imported or imp.imported.startswith(imported + ".")):
                found.append(f"{imp.importer} imports {imp.imported} ({imp.where()}): {why}")
    for module, path in pg.modules(root).items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines >= MAX_LINES:
            found.append(
                f"{module} has {lines} lines ({path.relative_to(root)}); keep modules under {MAX_LINES}"
            )
    return found


def test_the_packages_keep_their_layers() -> None:
    assert violations(ROOT) == []


def test_every_package_of_the_map_is_in_a_layer() -> None:
    layered = set(pg.BASE) | set(pg.STAGES) | set(pg.ORCHESTRATION) | {"fixos.images"}
    assert set(pg.package_dirs(ROOT)) <= layered


def _tree(root: Path, files: dict[str, str]) -> Path:
    mapping = {p: p.removeprefix("fixos.") or "fixos" for p in [*pg.BASE, *pg.STAGES, *pg.ORCHESTRATION]}
    table = "\n".join(f'"{package}" = "{folder}"' for package, folder in mapping.items())
    (root / "pyproject.toml").write_text(f"[tool.setuptools.package-dir]\n{table}\n")
    for folder in mapping.values():
        (root / folder).mkdir(exist_ok=True)
        (root / folder / "__init__.py").write_text("")
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))
    return root


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (
            {
                "core/models.py": "def f():\n    from fixos.shells import base\n",
                "shells/base.py": "from fixos.core.models import Verdict\n",
            },
            ["cycle between packages", "the base layer fixos.core imports fixos.shells"],
        ),
        (
            {"stack/hosts.py": "from fixos.episodes import Episode\n", "fixos/episodes.py": ""},
            ["stage fixos.stack imports orchestration fixos"],
        ),
        (
            {"injector/base.py": "from ..verifier import base\n", "verifier/base.py": ""},
            ["fixos.injector.base imports fixos.verifier.base"],
        ),
        (
            {"agents/oracle.py": "import fixos.scenarios.solution\n", "scenarios/solution.py": ""},
            ["fixos.agents.oracle imports fixos.scenarios.solution"],
        ),
        (
            {
                "scenarios/catalog.py": "from fixos.stack import hosts\n",
                "stack/hosts.py": "import fixos.scenarios\n",
            },
            ["cycle between packages: fixos.scenarios <-> fixos.stack"],
        ),
        ({"cli/main.py": "x = 1\n" * MAX_LINES}, [f"fixos.cli.main has {MAX_LINES} lines"]),
    ],
    ids=[
        "lazy-import-in-base",
        "stage-on-orchestration",
        "injector-verifier",
        "agent-solution",
        "cycle",
        "long",
    ],
)
def test_the_rules_catch_a_broken_tree(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    found = violations(_tree(tmp_path, files))
    for fragment in expected:
        assert any(fragment in line for line in found), (fragment, found)


def test_a_clean_made_up_tree_passes(tmp_path: Path) -> None:
    files = {
        "core/models.py": "import json\n",
        "shells/base.py": "from fixos.core import models\n",
        "fixos/episodes.py": "from fixos.shells.base import x\nfrom fixos.core.models import y\n",
        "cli/main.py": "def main():\n    from fixos.episodes import run\n",
    }
    assert violations(_tree(tmp_path, files)) == []
