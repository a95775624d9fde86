"""What the agent changed on disk, for the episode's record and page: per host, each path it
holds otherwise than its image as the agent left it, with who changed it and a diff.

Read from this machine, from outside the host, where the engine is local (the overlay's
proof, ``fixos.stack.overlay``): the host's upper directory holds every path it changed
against its image, and the image's layers what stood there before. Three readings of the
upper directory, each a walk with ``lstat`` (about 1 ms for a host's hundred entries):

- **healthy**, once the hosts are booted, before the faults go in;
- **confirmed**, once the faults are confirmed: also the bytes of its small regular files
  (``HELD_BYTES`` each), so the agent's own diff can be shown where the faults had
  changed the file already;
- **left**, after the agent's last step and before the final verdict's restarts.

A path is marked ``faults`` when the first two differ there, ``agent`` when the last two do
(owner, mode, type, size, inode and change time: the change time no one in the host can
set back). Neither: the host's own boot wrote it (its SSH host keys, the shop's
certificates). The diff is always against the image, so a reader sees what is still not as
healthy; the agent's own diff (confirmed against left) is added only where it differs from
that one (the file had been changed before the agent came).

Left out, as ``untouched`` leaves them: the trees the host writes on its own
(``KEPT_OUT``), and directories whose only change is a child's. Secrets are redacted
before anything is kept (``fixos.records.redact``); key files show sizes only. Everything
is capped (bytes read, lines and characters of diff, paths listed, entries walked), so a
host that filled itself with files costs a bounded walk. Nothing here raises: a host that
cannot be read says why in its ``note``. Where the engine is remote, nothing is read.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..records.models import FileChange, HostDisk
from ..records.redact import redact_file, secret_file
from ..verifier.untouched import KEPT_OUT
from .host_files import LocalView, open_in_root
from .overlay import Layers, overlay_changes

HELD_BYTES = 64 * 1024
"""a regular file up to this size has its bytes kept at confirmation (HELD_TOTAL a host)."""
HELD_TOTAL = 2 * 2**20
READ_BYTES = 256 * 1024
"""a file larger than this is not diffed (its sizes are told)."""
DIFF_LINES = 120
DIFF_CHARS = 8000
"""one diff's cap, in lines and characters."""
HOST_DIFF_CHARS = 64_000
"""past this many characters of diff on a host, its further files are listed without one."""
MAX_FILES = 200
MAX_ENTRIES = 20_000
"""entries of an upper directory walked at the most."""
REMOTE = (
    "not read: this machine cannot read the host's overlay directories (a remote engine, or "
    "another storage driver), and the engine's diff names paths only"
)

Shape = tuple[int, ...]
"""mode, owner, group, and for all but a directory: size, inode, change time (ns)."""


class Viewed(Protocol):
    """A host this machine may read without the engine (``LiveHost``)."""

    def view(self) -> LocalView: ...


@dataclass
class Reading:
    """One walk of a host's upper directory."""

    shapes: dict[str, Shape] = field(default_factory=dict)
    held: dict[str, bytes] = field(default_factory=dict)
    """the bytes of its small regular files, when asked."""
    whole: bool = True
    """False when the walk stopped at ``MAX_ENTRIES``."""


def _kept_out(rel: str) -> bool:
    return any(rel == t or rel.startswith(t + "/") for t in KEPT_OUT)


def _shape(st: os.stat_result) -> Shape:
    if stat.S_ISDIR(st.st_mode):  # a child created or removed changes its times: the child is listed
        return (st.st_mode, st.st_uid, st.st_gid)
    return (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_ino, st.st_ctime_ns)


def read_upper(layers: Layers, *, hold: bool = False) -> Reading:
    """The shapes of the upper directory's entries (and with ``hold`` its small files' bytes)."""
    reading = Reading()
    top, held = layers.upper, 0
    for dirpath, dirnames, filenames in os.walk(top):
        rel_dir = dirpath[len(top) :]
        dirnames[:] = [d for d in dirnames if not _kept_out(f"{rel_dir}/{d}")]
        for name in dirnames + filenames:
            rel = f"{rel_dir}/{name}"
            if _kept_out(rel):
                continue
            if len(reading.shapes) >= MAX_ENTRIES:
                reading.whole = False
                return reading
            try:
                st = os.lstat(f"{dirpath}/{name}")
            except OSError:
                continue
            reading.shapes[rel] = _shape(st)
            if hold and stat.S_ISREG(st.st_mode) and st.st_size <= HELD_BYTES and held < HELD_TOTAL:
                data = _read(top, rel, HELD_BYTES)[1]
                if data is not None:
                    reading.held[rel] = data
                    held += len(data)
    return reading


def _read(root: str, rel: str, limit: int) -> tuple[os.stat_result | None, bytes | str | None]:
    """``rel``'s lstat under ``root`` (a layer's directory) and its bytes (a regular file up to
    ``limit``) or target (a link); each None when not there. Resolved inside ``root`` by the
    kernel: a link the host planted on the way never leads to this machine's files."""
    try:
        base = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None, None
    try:
        handle = open_in_root(base, rel)
    except OSError:
        return None, None
    finally:
        os.close(base)
    try:
        st = os.fstat(handle)
        if stat.S_ISLNK(st.st_mode):
            return st, os.readlink("", dir_fd=handle)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return st, None
        fd = os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            return st, f.read(limit + 1)[:limit]
    except OSError:
        return None, None
    finally:
        os.close(handle)


def _in_image(layers: Layers, rel: str) -> tuple[os.stat_result | None, bytes | str | None]:
    for lower in layers.lowers:
        st, data = _read(lower, rel, READ_BYTES)
        if st is None:
            continue
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:  # a whiteout: the image deleted it
            return None, None
        return st, data
    return None, None


def _text(data: bytes | str | None) -> str | None:
    if not isinstance(data, bytes) or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def unified(path: str, before: str, after: str, old: str, new: str) -> str:
    """A capped, redacted unified diff of two texts of ``path`` (labelled ``old`` and ``new``)."""
    lines = list(
        difflib.unified_diff(
            redact_file(path, before).splitlines(),
            redact_file(path, after).splitlines(),
            f"{old} {path}",
            f"{new} {path}",
            n=2,
            lineterm="",
        )
    )
    kept, size = [], 0
    for line in lines[:DIFF_LINES]:
        if size + len(line) > DIFF_CHARS:
            break
        kept.append(line)
        size += len(line) + 1
    if len(kept) < len(lines):
        kept.append(f"[... {len(lines) - len(kept)} more line(s) of diff not kept]")
    return "\n".join(kept)


_KINDS = {
    stat.S_IFREG: "file",
    stat.S_IFDIR: "directory",
    stat.S_IFLNK: "link",
    stat.S_IFIFO: "FIFO",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
}


def _what(path: str, st: os.stat_result, data: bytes | str | None) -> str:
    kind = _KINDS.get(stat.S_IFMT(st.st_mode), "entry")
    if isinstance(data, str):
        return f"link -> {data}"
    if kind != "file":
        return kind
    if secret_file(path):
        return f"key material, {st.st_size} bytes (contents not shown)"
    text = _text(data)
    if data is None:
        return f"{st.st_size} bytes (too large to diff)"
    if text is None:
        return f"binary, {st.st_size} bytes"
    lines = text.count("\n") + (not text.endswith("\n") and text != "")
    return f"text, {lines} line{'' if lines == 1 else 's'}"


def _mode_owner(image: os.stat_result, left: os.stat_result) -> list[str]:
    said = []
    if stat.S_IMODE(image.st_mode) != stat.S_IMODE(left.st_mode):
        said.append(f"mode {stat.S_IMODE(image.st_mode):04o} -> {stat.S_IMODE(left.st_mode):04o}")
    if (image.st_uid, image.st_gid) != (left.st_uid, left.st_gid):
        said.append(f"owner {image.st_uid}:{image.st_gid} -> {left.st_uid}:{left.st_gid}")
    return said


def _shown(path: str) -> str:
    """A path as text a record can hold (a name's bytes that are no UTF-8 as U+FFFD)."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def describe(
    layers: Layers, rel: str, kind: str, confirmed: bytes | None, *, diffed: bool = True
) -> FileChange | None:
    """One path as the host left it against its image (``kind``: ``A``, ``C``, ``D``, or ``-``
    when the upper directory no longer holds it); ``confirmed``: its bytes at confirmation,
    if held; ``diffed``: False for the sizes only. None for a directory whose only change is
    below it."""
    path = _shown(rel)
    image_st, image_data = _in_image(layers, rel)
    left_st, left_data = (None, None) if kind in "D-" else _read(layers.upper, rel, READ_BYTES)
    said: list[str] = []
    if left_st is not None and image_st is not None:
        said = _mode_owner(image_st, left_st)
        if stat.S_ISDIR(left_st.st_mode) and stat.S_ISDIR(image_st.st_mode) and not said:
            return None
    names = {"A": "added", "C": "changed", "D": "deleted", "-": "as image"}
    change = FileChange(path=path, kind=names.get(kind, "changed"))  # type: ignore[arg-type]
    if left_st is not None:
        now = _what(path, left_st, left_data)
        was = "" if image_st is None else _what(path, image_st, image_data)
        said.insert(0, now if not was or was == now else f"{was} -> {now}")
    elif image_st is not None:
        said.insert(0, f"{'as' if kind == '-' else 'was'} the image's: {_what(path, image_st, image_data)}")
    else:
        said.insert(0, "gone, as in the image" if kind == "-" else "gone")
    secret = secret_file(path)
    before, after = _text(image_data), _text(left_data)
    if secret:
        if image_data != left_data and image_st is not None and left_st is not None:
            said.append("contents changed")
    elif (
        diffed
        and kind != "-"
        and (before is not None or image_st is None)
        and (after is not None or left_st is None)
    ):
        change.diff = unified(path, before or "", after or "", "image", "left")
        if not change.diff and image_data != left_data:
            said.append("changed only where secrets are redacted")
        elif not change.diff and left_st is not None and image_st is not None and not said[1:]:
            said.append("contents as the image's")
    held = _text(confirmed)
    if confirmed is not None and not secret and held is not None and confirmed != left_data:
        agent = unified(path, held, after or "", "confirmed", "left")
        if agent != change.diff:
            change.agent_diff = agent
    change.what = "; ".join(said)
    return change


def host_disk(
    name: str, layers: Layers | None, healthy: Reading | None, confirmed: Reading | None
) -> HostDisk:
    """What host ``name`` holds otherwise than its image now, each path marked by who changed it."""
    if layers is None:
        return HostDisk(host=name, note=REMOTE)
    if not os.path.isdir(layers.upper):
        return HostDisk(host=name, note="not read: its upper directory is gone (the host was removed)")
    left = read_upper(layers)
    notes = []
    kinds = overlay_changes(layers) if left.whole else None
    if kinds is None:  # walked only (a renamed directory, or too many entries): whiteouts deleted
        kinds = {p: "D" if stat.S_ISCHR(s[0]) else "C" for p, s in left.shapes.items()}
    paths = {p for p in kinds if not _kept_out(p)}
    if not left.whole:
        notes.append(f"walked {MAX_ENTRIES} entries of its upper directory, no more")
    elif confirmed is not None:  # what stood at confirmation and the agent took away
        paths |= {p for p in confirmed.shapes if p not in left.shapes}

    def differs(a: Reading | None, b: Reading | None, path: str) -> bool:
        return a is not None and b is not None and a.shapes.get(path) != b.shapes.get(path)

    if healthy is None or confirmed is None:
        notes.append("not read before the agent's turn: who changed what is not told")
    order = sorted(
        paths, key=lambda p: (not differs(confirmed, left, p), not differs(healthy, confirmed, p), p)
    )
    files: list[FileChange] = []
    size = 0
    for path in order:
        if len(files) >= MAX_FILES:
            notes.append(f"{len(order) - MAX_FILES} more path(s) not listed")
            break
        kind = kinds.get(path, "-" if path not in left.shapes else "C")
        held = confirmed.held.get(path) if confirmed is not None else None
        agent, faults = differs(confirmed, left, path), differs(healthy, confirmed, path)
        # the boot's own writes (host keys, the shop's certificates) are the same in every
        # episode: listed, not diffed, unless no reading tells who wrote what
        change = describe(layers, path, kind, held, diffed=agent or faults or healthy is None)
        if change is None:
            continue
        change.agent, change.faults = agent, faults
        size += len(change.diff) + len(change.agent_diff)
        if size > HOST_DIFF_CHARS:
            change.diff = change.agent_diff = ""
            change.what += f"; diff left out (this host's diffs passed {HOST_DIFF_CHARS} characters)"
        files.append(change)
    return HostDisk(
        host=name, files=files, note="; ".join(notes), marked=healthy is not None and confirmed is not None
    )


class DiskTrail:
    """The readings of one episode's hosts: ``healthy()`` once booted, ``confirmed()`` once
    the faults are confirmed, ``left()`` after the agent's turn (the record's ``disk``)."""

    def __init__(self) -> None:
        self._healthy: dict[str, Reading] = {}
        self._confirmed: dict[str, Reading] = {}

    @staticmethod
    def _read(hosts: Mapping[str, Viewed], *, hold: bool) -> dict[str, Reading]:
        found = {}
        for name, host in hosts.items():
            with contextlib.suppress(Exception):  # a reading missing only says less
                layers = host.view().layers
                if layers is not None:
                    found[name] = read_upper(layers, hold=hold)
        return found

    def healthy(self, hosts: Mapping[str, Viewed]) -> None:
        self._healthy = self._read(hosts, hold=False)

    def confirmed(self, hosts: Mapping[str, Viewed]) -> None:
        self._confirmed = self._read(hosts, hold=True)

    def left(self, hosts: Mapping[str, Viewed]) -> list[HostDisk]:
        found = []
        for name, host in hosts.items():
            try:
                found.append(
                    host_disk(name, host.view().layers, self._healthy.get(name), self._confirmed.get(name))
                )
            except Exception as exc:  # a harness reading: never the episode's failure
                found.append(HostDisk(host=name, note=f"not read: {type(exc).__name__}: {exc}"))
        return found
