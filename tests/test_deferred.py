"""core/deferred.py: a module stood in for until first used (paramiko at a command's start)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from fixos.core.deferred import defer


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A package `slowpkg` whose import is counted, with a submodule."""
    root = tmp_path / "slowpkg"
    root.mkdir()
    (root / "__init__.py").write_text(
        textwrap.dedent(
            """\
            import time
            LOADS = [1]
            time.sleep(0.05)  # long enough for two threads to meet in the load
            from slowpkg.part import PART
            VALUE = 42
            """
        )
    )
    (root / "part.py").write_text("import slowpkg\nPART = 'part'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "slowpkg"
    for name in ("slowpkg", "slowpkg.part"):
        sys.modules.pop(name, None)


def test_a_deferred_module_runs_at_its_first_use_in_the_same_object(package):
    defer(package)
    import slowpkg  # an import meanwhile, as docker-py's `import paramiko`

    assert type(slowpkg).__name__ == "_Deferred" and "slowpkg.part" not in sys.modules
    assert slowpkg.__spec__.name == "slowpkg"  # the import system's own reads load nothing
    assert slowpkg.VALUE == 42
    assert type(slowpkg) is type(sys) and sys.modules["slowpkg"] is slowpkg
    assert slowpkg.LOADS == [1] and slowpkg.PART == "part"
    from slowpkg.part import PART

    assert PART == "part"


def test_threads_reading_at_once_load_it_once(package):
    defer(package)
    import slowpkg

    seen: list[int] = []
    threads = [threading.Thread(target=lambda: seen.append(slowpkg.VALUE)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [42] * 4 and slowpkg.LOADS == [1]


def test_a_module_that_fails_to_load_fails_at_its_use_and_is_imported_again_after(package, tmp_path):
    init = tmp_path / "slowpkg" / "__init__.py"
    good = init.read_text()
    init.write_text("raise ImportError('no such library')\n")
    defer(package)
    import slowpkg

    with pytest.raises(ImportError, match="no such library"):
        slowpkg.VALUE  # noqa: B018
    assert "slowpkg" not in sys.modules
    init.write_text(good)
    import slowpkg as again

    assert again.VALUE == 42


def test_nothing_is_deferred_that_is_imported_already_or_missing(package):
    import slowpkg

    defer(package)
    assert sys.modules["slowpkg"] is slowpkg and type(slowpkg) is type(sys)
    defer("no_such_module_here")
    assert "no_such_module_here" not in sys.modules


def test_the_command_line_starts_without_paramiko_and_logs_in_with_it():
    code = textwrap.dedent(
        """\
        import sys
        from fixos.cli.main import main
        assert main(["list"]) == 0
        print(type(sys.modules["paramiko"]).__name__, "invoke" in sys.modules)
        from fixos.shells.ssh import EpisodeKey
        key = EpisodeKey()
        print(key.pkey.get_name(), type(sys.modules["paramiko"]).__name__)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[-2:] == ["_Deferred False", "ecdsa-sha2-nistp256 module"]
