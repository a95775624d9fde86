"""The package layers hold: a base that imports nothing else of FixOS, stages above it,
orchestration on top, each room importing only rooms below it, no cycle anywhere, and
every module under 400 lines. Every import between rooms names the real folder it
comes from: relative, and resolving to a file on disk by that very path.

The graph comes from scripts/package_graph.py (the same one the closing notes print):
every import of every module counts, lazy ones inside functions included.
"""

from __future__ import annotations

import ast
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
    # agents speak the report's format (fixos.diagnosis.report), never the truth or the grading
    ("fixos.agents", "fixos.diagnosis.truth", "an agent must not see the ground truth"),
    ("fixos.agents", "fixos.diagnosis.grade", "an agent must not see how its report is graded"),
]


def violations(root: Path) -> list[str]:
    """Every broken layer rule of the tree at ``root``, one line each."""
    graph = pg.package_graph(root)
    orchestration = set(pg.ORCHESTRATION)
    floors = pg.floors()
    found = [f"cycle between packages: {' <-> '.join(group)}" for group in pg.cycles(graph)]
    for source, targets in graph.items():
        for target, edge in targets.items():
            where = f"{edge[0].importer} imports {edge[0].imported} ({edge[0].where()})"
            if source in pg.BASE and target not in pg.BASE:
                found.append(f"the base layer {source} imports {target}: {where}")
            if source in pg.STAGES and target in orchestration:
                found.append(f"stage {source} imports orchestration {target}: {where}")
            elif source in floors and target in floors and floors.index(target) > floors.index(source):
                found.append(f"{source} imports {target}, a room above it: {where}")
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


def _tree(root: Path, files: dict[str, str | None]) -> Path:
    mapping = {p: p.removeprefix("fixos.") or "fixos" for p in [*pg.BASE, *pg.STAGES, *pg.ORCHESTRATION]}
    table = "\n".join(f'"{package}" = "{folder}"' for package, folder in mapping.items())
    (root / "pyproject.toml").write_text(f"[tool.setuptools.package-dir]\n{table}\n")
    for folder in mapping.values():
        (root / folder).mkdir(exist_ok=True)
        (root / folder / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")  # the checkout marked as the rooms' parent, as the real one is
    for name, text in files.items():
        if text is None:
            (root / name).unlink()
        else:
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
            {"stack/hosts.py": "from ..episodes.episode import Episode\n", "episodes/episode.py": ""},
            ["stage fixos.stack imports orchestration fixos.episodes"],
        ),
        (
            {"episodes/episode.py": "def f():\n    from ..bench import local\n", "bench/local.py": ""},
            ["fixos.episodes imports fixos.bench, a room above it"],
        ),
        (
            {"scenarios/catalog.py": "from ..stack.hosts import LiveHost\n", "stack/hosts.py": ""},
            ["fixos.scenarios imports fixos.stack, a room above it"],
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
                "stack/hosts.py": "from fixos.scenarios import catalog\n",
                "scenarios/catalog.py": "import fixos.stack.hosts\n",
            },
            ["cycle between packages: fixos.scenarios <-> fixos.stack"],
        ),
        ({"cli/main.py": "x = 1\n" * MAX_LINES}, [f"fixos.cli.main has {MAX_LINES} lines"]),
    ],
    ids=[
        "lazy-import-in-base",
        "stage-on-orchestration",
        "room-above",
        "stage-above",
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
        "episodes/episode.py": "from fixos.shells.base import x\nfrom fixos.core.models import y\n",
        "cli/main.py": "def main():\n    from fixos.episodes.episode import run\n",
    }
    assert violations(_tree(tmp_path, files)) == []


def _on_disk(path: Path, level: int, module: str | None) -> Path:
    """Where a relative import of ``path`` points when read as folders: no namespace map."""
    folder = path.parent
    for _ in range(level - 1):
        folder = folder.parent
    return folder.joinpath(*module.split(".")) if module else folder


def _by_map(root: Path, dotted: str) -> Path | None:
    """Where Python finds ``dotted`` through pyproject's package-dir map."""
    dirs = pg.package_dirs(root)
    owner = pg.package_of(dotted, list(dirs))
    if owner is None:
        return None
    rest = dotted.removeprefix(owner).lstrip(".")
    return dirs[owner].joinpath(*rest.split(".")) if rest else dirs[owner]


def _exists(target: Path) -> bool:
    return target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()


def unfollowable(root: Path) -> list[str]:
    """Every import inside the namespace that a reader cannot follow from file to file."""
    found = []
    dirs = pg.package_dirs(root)
    top = dirs["fixos"]
    for module, path in pg.modules(root).items():
        if not (path.parent / "__init__.py").is_file():
            continue  # a script shipped as data (the exporter's templates), not a module of a room
        where = f"{path.relative_to(root)}"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name == "fixos" or a.name.startswith("fixos.")]
                if names and path.parent != top:
                    found.append(f"{where}:{node.lineno} imports {names[0]} by the namespace, not its folder")
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                name = node.module or ""
                if (name == "fixos" or name.startswith("fixos.")) and path.parent != top:
                    found.append(f"{where}:{node.lineno} imports {name} by the namespace, not its folder")
            elif isinstance(node, ast.ImportFrom):
                parts = package.split(".")
                if node.level > len(parts):
                    found.append(f"{where}:{node.lineno} climbs above the namespace")
                    continue
                dotted = ".".join([*parts[: len(parts) - node.level + 1], *filter(None, [node.module])])
                disk, mapped = _on_disk(path, node.level, node.module), _by_map(root, dotted)
                climbed = [path.parents[up] for up in range(node.level)]
                if any(not (folder / "__init__.py").is_file() for folder in climbed):
                    # read as folders, a relative import climbs only through packages
                    found.append(f"{where}:{node.lineno} climbs through a folder that is no package")
                elif not _exists(disk):
                    found.append(f"{where}:{node.lineno} imports {dotted}: no {disk.relative_to(root)}[.py]")
                elif mapped is None or disk.resolve() != mapped.resolve():
                    said = f"the folders say {disk}, Python {mapped}"
                    found.append(f"{where}:{node.lineno} imports {dotted}: {said}")
    return found


def test_every_import_between_rooms_names_the_folder_it_comes_from() -> None:
    assert unfollowable(ROOT) == []


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"injector/process.py": "from fixos.stack.hosts import LiveHost\n"}, "by the namespace"),
        ({"injector/process.py": "def f():\n    import fixos.stack.hosts\n"}, "by the namespace"),
        ({"injector/process.py": "from ..stak.hosts import LiveHost\n"}, "no stak/hosts[.py]"),
        ({"injector/process.py": "from ...stack import hosts\n"}, "climbs above the namespace"),
        ({"fixos/api.py": "from .episodes.episode import Episode\n", "episodes/episode.py": ""}, "no fixos"),
        ({"injector/process.py": "from ..stack import hosts\n", "__init__.py": None}, "no package"),
    ],
    ids=[
        "absolute",
        "absolute-lazy",
        "no-such-folder",
        "above-the-top",
        "root-is-not-the-parent",
        "no-marker",
    ],
)
def test_an_import_a_reader_cannot_follow_is_found(
    tmp_path: Path, files: dict[str, str], expected: str
) -> None:
    found = unfollowable(_tree(tmp_path, {"stack/hosts.py": "", **files}))
    assert any(expected in line for line in found), found


def test_the_root_package_may_name_rooms_by_the_namespace(tmp_path: Path) -> None:
    files = {
        "fixos/__init__.py": "def f():\n    from fixos.episodes.api import episode\n",
        "episodes/api.py": "",
    }
    assert unfollowable(_tree(tmp_path, files)) == []
