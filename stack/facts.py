"""A host's state in a few milliseconds: facts read from this machine, from outside the
host, that say whether anything a check looks at may have changed since the last look.

The running score (``progress``: every step of a trainer) judged every check at every
step, ~100 ms for a step that usually changed nothing. A check declares which facts its
outcome follows from (``Check.facts``); where they equal the previous judgement's, the
outcome is kept (``fixos.verifier.verify``). The facts are fingerprints, never evidence:
the final verdict asks every check again.

Read only where the host's init is a process of this machine (the overlay walk's
proof, ``fixos.stack.overlay``), with nothing run in the host and no engine call:
- **files**: every entry of the host's overlay upper directory (what it changed
  against its image: nothing else can differ) and of its own mounts (``/var/log``'s
  tmpfs, the engine's ``/etc/hosts``), by owner, mode and type, and, for contents,
  size, modification and change times and inode. The change time is the kernel's:
  no one in the host can set it back (``touch -r`` sets the other two). It is stamped
  from a coarse clock, so an entry changed within ``SETTLING_NS`` of the reading
  makes the facts equal to no others: a write in the same clock tick cannot hide.
- **processes**: every process of the host's PID namespace (the judge's sessions and
  the agent's included) by PID, parent, start time, owner, stopped/zombie, program
  and command line.
- **listening**: the host's TCP listeners, UDP sockets and listening UNIX sockets, by
  address, owner and inode, from its network namespace's own tables.

What facts do not see, and checks that depend on it declare no facts (asked at every
judgement): a daemon's state changed through its own protocol (MariaDB's ``SET
GLOBAL``), answers over the network (pages, TLS), CPU and memory use, the firewall and
queueing rules, and a socket handed from one process to another that was already there.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from ..core.models import HostProcess
from . import sockdiag, sockets
from .contents import digest_of
from .host_files import is_procfs, open_dir_in_root, open_in_root, read_proc

SETTLING_NS = 50_000_000
"""an entry changed this recently (50 ms, more than a few ticks of the kernel's coarse
clock) may change again with the same times: such facts never equal others."""

MAX_ENTRIES = 200_000
"""entries of a host's upper directory read at the most (a healthy host has a few thousand):
past it the facts are never equal and give no modes; the checks ask the judge (bounded)."""

_SIGNALS = ("SigPnd", "ShdPnd", "SigBlk", "SigCgt")
_PSEUDO = ("/proc", "/sys", "/dev")  # mounts whose entries are the kernel's, not the host's state

Entry = tuple[str, int, int, int, int, int, int, int]
"""path, mode, owner, group, size, modification ns, change ns, inode."""


def _under(path: str, tree: str) -> bool:
    tree = tree.rstrip("/") or "/"
    return tree == "/" or path == tree or path.startswith(tree + "/")


def _related(path: str, trees: Sequence[str], entries: Sequence[str]) -> bool:
    """``path`` lies in one of ``trees``, is one of ``entries``, or is a directory above
    one of either (a link or mode swapped there changes what lies below)."""
    return any(_under(path, t) or _under(t, path) for t in trees) or any(_under(e, path) for e in entries)


def _relation(trees: Sequence[str], entries: Sequence[str]) -> Callable[[str], bool]:
    """``_related`` for many paths against the same ``trees`` and ``entries``: the paths
    that qualify by equality (the entries, the trees and every directory above either) in
    a set, the trees' insides by one prefix test (a judgement asks ~20 times of ~2,000
    entries a host)."""
    tops = [t.rstrip("/") or "/" for t in trees]
    if "/" in tops:
        return lambda path: True
    exact: set[str] = set()
    for path in [*tops, *(e.rstrip("/") or "/" for e in entries)]:
        exact.add(path)
        while path not in ("", "/"):
            path = path.rsplit("/", 1)[0] or "/"
            exact.add(path)
    inside = tuple(t + "/" for t in tops)
    return lambda path: path in exact or path.startswith(inside)


def _entry(rel: str, st: os.stat_result) -> Entry:
    return (rel, st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _mounts(pid: int) -> list[str]:
    """The mount points of the host's own mounts (a tmpfs, a file the engine binds, a
    volume), but its root and the kernel's."""
    found = []
    with open(f"/proc/{pid}/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point != "/" and not any(_under(point, p) for p in _PSEUDO):
                found.append(point)
    return found


class HostFacts:
    """One reading of one host's facts, each kind read once, when first asked (checks ask
    from several threads)."""

    def __init__(self, pid: int, upper: str, root_fd: int) -> None:
        self._pid, self._upper, self._root = pid, upper, root_fd
        self._locks = {kind: threading.Lock() for kind in ("files", "processes", "listening")}
        self._read: dict[str, object] = {}
        self._started = time.time_ns()
        self._whiteouts: set[str] = set()
        self._from_upper = 0
        """how many of the file entries are the upper directory's (the rest: the mounts')."""
        self._points: list[str] = []
        self._overflow = False

    def _once(self, kind: str, read: Callable[[], object]) -> object:
        with self._locks[kind]:  # each kind once, kinds side by side
            if kind not in self._read:
                self._read[kind] = read()
            return self._read[kind]

    # -- files ------------------------------------------------------------

    def _entries(self) -> list[Entry]:
        entries: list[Entry] = []
        top = self._upper
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames + filenames:
                if len(entries) >= MAX_ENTRIES:
                    self._overflow = True  # a host that filled itself with files: read no further
                    return []
                full = f"{dirpath}/{name}"
                try:
                    st = os.lstat(full)
                except FileNotFoundError:
                    continue
                entry = _entry(full[len(top) :], st)
                if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                    self._whiteouts.add(entry[0])  # overlay's mark of a deleted path
                opaque = stat.S_ISDIR(st.st_mode) and _xattrs(full)
                entries.append(entry if not opaque else (*entry[:-1], -entry[-1]))
        self._from_upper = len(entries)
        for point in _mounts(self._pid):
            self._points.append(point)
            entries.extend(self._mounted(point))
        return entries

    def _mounted(self, point: str) -> Iterable[Entry]:
        """The entries of one of the host's mounts, opened inside the host's root (a link the
        host planted on the way resolves there, never in this machine's root)."""
        try:
            handle = open_in_root(self._root, point)
        except OSError:
            return [(point, -1, 0, 0, 0, 0, 0, 0)]
        try:
            st = os.fstat(handle)
            if not stat.S_ISDIR(st.st_mode):
                return [_entry(point, st)]  # a file the engine binds (/etc/hosts), or a link
            top = os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return [(point, -2, 0, 0, 0, 0, 0, 0)]
        finally:
            os.close(handle)
        entries = [_entry(point, st)]
        try:
            for dirpath, dirnames, filenames, fd in os.fwalk(".", dir_fd=top):
                for name in dirnames + filenames:
                    try:
                        inner = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    entries.append(_entry(f"{point}/{dirpath[2:]}/{name}".replace("//", "/"), inner))
        finally:
            os.close(top)
        return entries

    def files(self, trees: Sequence[str], *, contents: bool = True, entries: Sequence[str] = ()) -> bytes:
        """A digest of what the host changed in ``trees``, at ``entries`` (each by itself,
        not what lies below) and above either: owners, modes and types, and with
        ``contents`` sizes and times too. Unique when an entry there changed within
        ``SETTLING_NS`` of the reading."""
        found = self._once("files", self._entries)
        assert isinstance(found, list)
        if self._overflow:
            return os.urandom(16)  # not read whole: equal to nothing, every check asked again
        digest = hashlib.sha256()
        related = _relation(trees, entries)
        for entry in found:
            if not related(entry[0]):
                continue
            if contents and self._started - entry[6] < SETTLING_NS:
                return os.urandom(16)  # still settling: equal to nothing
            # without contents: path, type and mode, owners, and whether overlay made the
            # directory opaque (its lower entries then read deleted)
            digest.update(repr(entry if contents else (*entry[:4], entry[7] < 0)).encode())
        return digest.digest()

    def contents(self, trees: Sequence[str], entries: Sequence[str], limit: int = 1 << 20) -> bytes | None:
        """What the host holds otherwise than its image in ``trees``, at ``entries`` and in the
        directories above either, by what is there, not when (``fixos.stack.contents``)."""
        found = self.entries()
        if found is None:
            return None
        related, inside = _relation(trees, entries), _relation([*trees, *entries], [])
        settled = self._started - SETTLING_NS
        return digest_of(found, self._from_upper, settled, self._root, related, inside, limit)

    def entries(self) -> list[Entry] | None:
        """Every entry the host changed against its image and of its own mounts, as read
        (``Entry``); None when there were too many to read whole."""
        found = self._once("files", self._entries)
        assert isinstance(found, list)
        return None if self._overflow else list(found)

    def modes(self, trees: Sequence[str]) -> dict[str, str] | None:
        """path -> ``uid:gid:mode:type`` (``find -printf '%U:%G:%m:%y'``) of every entry in
        ``trees`` that the host holds otherwise than its image: what its upper directory
        changed (deleted paths left out) and what its own mounts hold, a mount hiding what
        lies under it. Every other path of the trees is the image's, as it was on the
        healthy host. None where that does not hold: a mount that could not be read, or a
        directory overlay redirects to one of the image's (renamed without a copy)."""
        found = self._once("files", self._entries)
        assert isinstance(found, list)
        if self._overflow:
            return None

        def inside(path: str) -> bool:
            return any(_under(path, tree) for tree in trees)

        listing: dict[str, str] = {}
        for index, entry in enumerate(found):
            path, mode, uid, gid = entry[:4]
            upper = index < self._from_upper
            if not inside(path) or (upper and path in self._whiteouts):
                continue
            if upper and any(_under(path, point) for point in self._points):
                continue  # hidden under a mount: the mount's own entry is what the host sees
            if mode < 0 or (entry[7] < 0 and _redirected(f"{self._upper}{path}")):
                return None
            listing[path] = f"{uid}:{gid}:{stat.S_IMODE(mode):o}:{_TYPES.get(stat.S_IFMT(mode), '?')}"
        return listing

    # -- processes and sockets --------------------------------------------

    def _each_process(self) -> Iterator[tuple[str, str, bytes, bytes, str, os.stat_result]]:
        """(its ``/proc`` entry's path, its PID as the host numbers it, stat line, command line,
        executable, the entry's stat) of each process of the host's PID namespace; one that
        ended while read is passed over, as from inside; none when the host's init is gone.
        Listed from the host's own ``/proc``, the kernel's procfs of its PID namespace (proved
        so, and that namespace's by its init's entry), which root in the host can neither
        replace nor cover (a mount point; no mount without CAP_SYS_ADMIN); its stat lines
        number parents as the host does (0: outside it). Not this machine's ``/proc``: with 64
        hosts, each reading walked all ~1,300 processes (12 ms against 1.5)."""
        try:
            mine = os.readlink(f"/proc/{self._pid}/ns/pid")
            proc = open_dir_in_root(self._root, "/proc")
        except OSError:
            return
        try:
            base = f"/proc/self/fd/{proc}"
            try:
                if not is_procfs(proc) or os.readlink(f"{base}/1/ns/pid") != mine:
                    return  # not the procfs of the host's namespace: nothing is read from it
                names = [name for name in os.listdir(base) if name.isdigit()]
            except OSError:
                return
            for name in names:
                where = f"{base}/{name}"
                try:
                    line = read_proc(f"{where}/stat")
                    argv = read_proc(f"{where}/cmdline")
                    try:
                        exe = os.readlink(f"{where}/exe")
                    except OSError:
                        exe = ""
                    owner = os.stat(where)
                except OSError:
                    continue
                yield where, name, line, argv, exe, owner
        finally:
            os.close(proc)

    def _processes(self) -> bytes:
        rows = []
        for _, name, line, argv, exe, owner in self._each_process():
            comm, _, after = line.rpartition(b")")
            fields = after.split()
            if len(fields) < 20:
                continue
            state = fields[0] if fields[0] in (b"Z", b"T", b"t", b"X") else b"-"
            rows.append((name, fields[1], fields[19], state, comm, argv, exe, owner.st_uid, owner.st_gid))
        return hashlib.sha256(repr(sorted(rows)).encode()).digest()

    def process_table(self) -> list[HostProcess]:
        """Every process of the host's PID namespace, numbered as the host's, read now (never kept)."""
        table = []
        for _, name, line, argv, exe, _ in self._each_process():
            try:
                head, _, after = line.rpartition(b")")
                fields = after.split()
                comm = head.partition(b"(")[2].decode("utf-8", "replace")
                pid, parent, state = int(name), int(fields[1]), fields[0].decode()
            except (IndexError, ValueError):
                continue
            text = argv.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
            table.append(HostProcess(pid, parent, state, comm, _args(argv, comm, state), exe, text))
        return table

    def processes(self) -> bytes:
        """A digest of every process of the host's PID namespace."""
        found = self._once("processes", self._processes)
        assert isinstance(found, bytes)
        return found

    def dying_text(self) -> str:
        """``exits.DYING_PROBE``'s output, read from this machine: each of the host's
        processes' signal masks and stat line (numbered as the host numbers them)."""
        lines = []
        for where, name, line, *_ in self._each_process():
            try:
                status = read_proc(f"{where}/status").decode("utf-8", "replace")
            except OSError:
                continue
            lines += [f"/proc/{name}/status:{row}" for row in status.splitlines() if row[:6] in _SIGNALS]
            lines.append(f"/proc/{name}/stat:{line.decode('utf-8', 'replace').rstrip()}")
        return "\n".join(lines)

    def _listening(self) -> bytes:
        return sockets.listening_digest(self._pid)

    def listener_lines(self) -> list[str] | None:
        """The host's listeners as ``ss -l`` names them, read now (``sockets.listener_lines``)."""
        return sockets.listener_lines(self._pid, self._root)

    def tcp_owners(self, port: int) -> list[str] | None:
        """Who holds a listening TCP socket on ``port``, as ``ss -p`` names them (``sockets.tcp_owners``)."""
        return sockets.tcp_owners(self._pid, port, ((w, line) for w, _, line, *_ in self._each_process()))

    def connections(self) -> list[sockdiag.Connection] | None:
        """The host's TCP connections as its kernel sees them now (``sockdiag.connections``)."""
        return sockdiag.connections(self._pid)

    def servers_holding(self, inodes: set[int]) -> dict[int, str]:
        """inode -> ``comm`` of the host's server holding it (``sockets.servers_holding``)."""
        return sockets.servers_holding(self._pid, inodes, ((w, ln) for w, _, ln, *_ in self._each_process()))

    def listening(self) -> bytes:
        """A digest of the host's listeners (TCP, UDP, UNIX), with their owners and inodes."""
        found = self._once("listening", self._listening)
        assert isinstance(found, bytes)
        return found


_CONTROL = dict.fromkeys([*range(32), 127], "?")


def _args(argv: bytes, comm: str, state: str) -> str:
    """``ps``'s ``args``: the command line joined by spaces, control characters as ``?``."""
    if state == "Z":
        return f"[{comm}] <defunct>"
    text = argv.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    return text.translate(_CONTROL) or f"[{comm}]"


_TYPES = {
    stat.S_IFREG: "f",
    stat.S_IFDIR: "d",
    stat.S_IFLNK: "l",
    stat.S_IFCHR: "c",
    stat.S_IFBLK: "b",
    stat.S_IFIFO: "p",
    stat.S_IFSOCK: "s",
}
"""``find``'s letter for each file type (``%y``)."""


def _redirected(path: str) -> bool:
    """Whether overlay shows one of the image's directories here, renamed without a copy
    (``redirect_dir``, off in most kernels: a rename then copies the tree up)."""
    try:
        os.getxattr(path, "trusted.overlay.redirect", follow_symlinks=False)
        return True
    except OSError:
        return False


def _xattrs(path: str) -> bool:
    """Whether overlay marks the directory: replaced as a whole, or renamed."""
    for name in ("trusted.overlay.opaque", "trusted.overlay.redirect"):
        try:
            os.getxattr(path, name, follow_symlinks=False)
            return True
        except OSError:
            continue
    return False
