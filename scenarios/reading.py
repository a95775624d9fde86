"""Reading a scenario file into plain data, within bounds a hostile file cannot push past.

A scenario is a few kilobytes of YAML. A file may be anything, though: huge,
not UTF-8, nested ten thousand levels deep, or a "billion laughs" whose aliases
expand to 10**9 nodes from 1 KB of text. PyYAML shares an aliased node instead
of copying it, so loading such a file is cheap; what walks the data afterwards
(validation, an error message quoting it) expands it and runs out of memory.
The loader here counts every node as it would be once aliases are expanded and
stops at ``MAX_NODES``, before anything walks it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import SafeConstructor
from yaml.nodes import Node
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

MAX_BYTES = 2**20
"""a scenario file larger than this is refused unread (the shipped ones are < 10 KB)."""
MAX_NODES = 20_000
"""YAML nodes once every alias is expanded (the shipped scenarios have < 1,000)."""
MAX_DEPTH = 64
"""nesting of collections (the shipped scenarios nest < 10 deep); PyYAML composes recursively."""
SHOWN = 200
"""at most this many characters of a value are quoted in an error message."""


def shown(value: Any) -> str:
    """``repr(value)``, cut to ``SHOWN`` characters: a 1 MB bad value is not echoed whole."""
    if isinstance(value, (dict, list, tuple, set)) and len(value) > SHOWN:
        return f"<{type(value).__name__} of {len(value)} items>"  # repr of a huge one is itself slow
    text = repr(value)
    return text if len(text) <= SHOWN else f"{text[: SHOWN - 23]}... ({len(text)} chars)"


class FileProblem(Exception):
    """What is wrong with the file as text or YAML: ``where`` (``line N``, ``size``) and a problem."""

    def __init__(self, where: str, problem: str) -> None:
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}")


class BoundedComposer(Composer):
    """PyYAML's composer, refusing documents that expand past ``MAX_NODES`` or nest past
    ``MAX_DEPTH``, and aliases to a collection that contains them (a cycle). It is the only
    recursive step: the parsers beneath it keep their own stack, so no depth reaches C or
    Python's stack before this refuses it."""

    def __init__(self) -> None:
        super().__init__()
        self.expanded = 0
        self.depth = 0
        self.sizes: dict[int, int] = {}
        """id(node) -> its size with aliases expanded, for nodes composed so far."""

    def _grow(self, by: int, mark: Any) -> None:
        self.expanded += by
        if self.expanded > MAX_NODES:
            raise ComposerError(None, None, f"more than {MAX_NODES} nodes once aliases are expanded", mark)

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None:  # an undefined alias: PyYAML's own error
                if id(target) not in self.sizes:
                    raise ComposerError(
                        None,
                        None,
                        f"alias *{event.anchor[:SHOWN]} refers to a node containing it",
                        event.start_mark,
                    )
                self._grow(self.sizes[id(target)], event.start_mark)
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ComposerError(
                None, None, f"nested more than {MAX_DEPTH} levels deep", self.peek_event().start_mark
            )
        before = self.expanded
        node = super().compose_node(parent, index)
        self.depth -= 1
        self._grow(1, node.start_mark if node is not None else None)
        if node is not None:
            self.sizes[id(node)] = self.expanded - before
        return node


class BoundedLoader(Reader, Scanner, Parser, BoundedComposer, SafeConstructor, Resolver):
    """PyYAML's safe loader, all in Python, under the bounded composer."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)  # its reader refuses control characters
        Scanner.__init__(self)
        Parser.__init__(self)
        BoundedComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


LOADERS: list[type] = [BoundedLoader]
"""the loaders ``read_yaml`` may use, fastest first."""

if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class FastBoundedLoader(BoundedComposer, CParser, SafeConstructor, Resolver):  # type: ignore[misc]
        """libyaml's reader, scanner and parser (C; it refuses control characters too) under the
        bounded composer, which comes first so that its ``get_single_node`` replaces
        libyaml's, whose recursion has no bound. The catalogue loads in 19 ms instead of
        100 ms, at the start of nearly every command."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            BoundedComposer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    LOADERS.insert(0, FastBoundedLoader)


def read_yaml(path: Path) -> Any:
    """The file's YAML document as plain data, or FileProblem; OSError when it cannot be read."""
    with open(path, "rb") as f:
        raw = f.read(MAX_BYTES + 1)  # never more: the file may be endless (/dev/zero)
    if len(raw) > MAX_BYTES:
        raise FileProblem("size", f"larger than {MAX_BYTES // 2**20} MiB; a scenario is a few KB of YAML")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise FileProblem(f"line {line}", f"not UTF-8 text (byte {raw[exc.start]:#04x})") from None
    loader: Any = None
    try:
        loader = LOADERS[0](text)
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        position = getattr(exc, "position", None)  # a ReaderError has no mark
        if mark is not None:
            where = f"line {mark.line + 1}"
        elif isinstance(position, int):
            where = f"line {text[:position].count(chr(10)) + 1}"
        else:
            where = "YAML"
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc).splitlines()[0]
        raise FileProblem(where, f"invalid YAML: {_cut(problem)}") from None
    except (ValueError, TypeError, OverflowError, IndexError, KeyError, AttributeError) as exc:
        # a tagged value PyYAML cannot build: `!!int x` (ValueError), `!!int` with nothing
        # (IndexError), `!!bool ''` (KeyError), `!!timestamp x` (AttributeError)
        detail = str(exc) or type(exc).__name__
        raise FileProblem("YAML", f"invalid value: {_cut(detail)}") from None
    finally:
        if loader is not None:
            loader.dispose()


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHOWN else f"{text[: SHOWN - 3]}..."
