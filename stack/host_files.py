"""A host's files read from this machine, inside the host's own root.

The engine's archive API is the portable way to read a container's file, but each
call costs about 40 ms and the engine's CPU (a tar stream), and a verdict reads a
few sets of files (the checks' files, the services' pid files before and after the
hold). Where the engine is this machine's, the host's init is a process here too, and
its root is ``/proc/<pid>/root``: its filesystem with its mounts (``/var/log``'s tmpfs,
the engine's ``/etc/hosts``).

Read naively, that root is a trap: an absolute symlink under it resolves in *this*
machine's root, so a host could point ``/etc/nginx/nginx.conf`` at a file of the
machine and have it read into a verdict. Every path is therefore opened with
``openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)``: the kernel resolves each
component, links included, as if the host's root were ``/`` (``..`` stops there, no
``/proc/*/root`` jumps), in one call that a rename in the host cannot race. The last
component is not followed (like the engine's archive, which gives a link as a link).
It is opened ``O_PATH`` first and read only when it is a regular file: a FIFO, a
socket or a device node planted there (root in a host may ``mknod``) is never opened
for reading. Files larger than the caller's limit are not read.

Used only when the container's init is proven to be this machine's
(``fixos.stack.overlay.local_layers``) and this process may open its root (root);
everywhere else, the engine's archive.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import itertools
import os
import socket
import stat
from collections.abc import Iterator
from dataclasses import dataclass

import docker
from docker.errors import DockerException

from .overlay import Layers, local_layers
from .sockdiag import socket_in

SYS_OPENAT2 = 437
"""the same number on every architecture Linux gained it on (5.6)."""
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_IN_ROOT = 0x10


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long


def open_in_root(root_fd: int, path: str) -> int:
    """An ``O_PATH`` descriptor of ``path`` resolved inside the root ``root_fd``; OSError."""
    how = _OpenHow(os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
    relative = path.lstrip("/") or "."
    fd = _LIBC.syscall(SYS_OPENAT2, root_fd, relative.encode(), ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno), path)
    return int(fd)


def open_dir_in_root(root_fd: int, path: str) -> int:
    """A readable descriptor of the directory ``path`` resolved inside the root ``root_fd``
    (``open_in_root``, then the pinned directory itself opened); OSError."""
    handle = open_in_root(root_fd, path)
    try:
        return os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    finally:
        os.close(handle)


PROC_SUPER_MAGIC = 0x9FA0


def is_procfs(fd: int) -> bool:
    """Whether the directory ``fd`` is a mount of the kernel's procfs (``fstatfs``'s type):
    a directory of links and files made to look like one is not."""
    buffer = ctypes.create_string_buffer(256)  # struct statfs: f_type (a long) comes first
    if _LIBC.fstatfs(fd, buffer) != 0:
        return False
    return ctypes.c_long.from_buffer(buffer).value == PROC_SUPER_MAGIC


def read_proc(path: str) -> bytes:
    """A whole ``/proc`` file, by the bare system calls: a Python file object costs three
    more (an fstat, a seek, a tty probe), and a reading of a host's process table opens two
    files a process."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return b"".join(iter(lambda: os.read(fd, 65536), b""))
    finally:
        os.close(fd)


def read_pinned(handle: int, limit: int) -> bytes | None:
    """The bytes of the regular file an ``O_PATH`` descriptor (``open_in_root``'s) pins; None
    for anything else (a FIFO or a device is never opened), past ``limit``, or unreadable."""
    try:
        st = os.fstat(handle)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        # The O_PATH descriptor pins the inode; reopening it reads that same file.
        fd = os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    try:
        data = bytearray()
        while len(data) <= limit:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
        return None if len(data) > limit else bytes(data)
    except OSError:
        return None
    finally:
        os.close(fd)


class HostFiles:
    """The root of one host, held open; ``read`` its regular files."""

    def __init__(self, pid: int) -> None:
        """OSError when this process cannot open ``/proc/<pid>/root`` or the kernel has no openat2."""
        self.pid = pid
        self._root = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.close(open_in_root(self._root, "/"))
        except OSError:
            os.close(self._root)
            raise

    @property
    def root_fd(self) -> int:
        """The host's root, held open (``O_PATH``): for ``open_in_root``."""
        return self._root

    def read(self, path: str, limit: int) -> bytes | None:
        """The bytes of the regular file at ``path``; None when there is none (or it is a
        link, a directory, a FIFO, a device), or it is larger than ``limit``."""
        try:
            handle = open_in_root(self._root, path)
        except OSError:
            return None
        try:
            return read_pinned(handle, limit)
        finally:
            os.close(handle)

    def walk(self, tops: list[str]) -> Iterator[tuple[str, os.stat_result]]:
        """Every entry at and below each of ``tops``, with its ``lstat``, as ``find -P -xdev``
        meets them: links are entries, never followed; a directory of another filesystem is
        listed, not entered. Each top is opened inside the host's root, and the walk below
        it goes by directory descriptors, so no link planted on the way leads out of it."""
        for top in tops:
            try:
                handle = open_in_root(self._root, top)
            except OSError:
                continue
            try:
                st = os.fstat(handle)
                yield top, st
                if not stat.S_ISDIR(st.st_mode):
                    continue
                below = os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                continue
            finally:
                os.close(handle)
            try:
                for dirpath, dirnames, filenames, fd in os.fwalk(".", dir_fd=below):
                    base = top.rstrip("/") + dirpath[1:]
                    for name in [*dirnames, *filenames]:
                        try:
                            inner = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        except OSError:
                            continue
                        yield f"{base}/{name}", inner
                        if name in dirnames and inner.st_dev != st.st_dev:
                            dirnames.remove(name)
            finally:
                os.close(below)

    def readlink(self, path: str) -> str | None:
        """Where the link at ``path`` points, as written in it; None when it is no link."""
        try:
            handle = open_in_root(self._root, path)
        except OSError:
            return None
        try:
            return os.readlink("", dir_fd=handle)
        except OSError:
            return None
        finally:
            os.close(handle)

    def connect(self, path: str, timeout: float) -> socket.socket:
        """A stream connection to the UNIX socket at ``path``, resolved inside the host's
        root (a link planted there never reaches a socket of this machine's); OSError."""
        handle = open_in_root(self._root, path)
        try:
            if not stat.S_ISSOCK(os.fstat(handle).st_mode):
                raise OSError(errno.ENOTSOCK, "not a socket", path)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            try:
                sock.connect(f"/proc/self/fd/{handle}")
            except OSError:
                sock.close()
                raise
            return sock
        finally:
            os.close(handle)

    def connect_tcp(self, address: str, port: int, timeout: float) -> socket.socket:
        """A TCP connection to ``address:port`` made inside the host's network namespace
        (its loopback is the host's, not this machine's); OSError."""
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        sock = socket_in(self.pid, family, socket.SOCK_STREAM)
        if sock is None:
            raise OSError(errno.EPERM, "cannot enter the host's network namespace", address)
        sock.settimeout(timeout)
        try:
            sock.connect((address, port))
        except OSError:
            sock.close()
            raise
        return sock

    def own_address(self) -> str | None:
        """The host's first IPv4 address that is not loopback (what its peers reach), as
        its routing table lists its local addresses; None when it has none."""
        try:
            with open(f"/proc/{self.pid}/net/fib_trie", encoding="ascii", errors="replace") as table:
                lines = table.read(1 << 20).splitlines()
        except OSError:
            return None
        for before, line in itertools.pairwise(lines):
            address = before.strip().removeprefix("|-- ").removeprefix("+-- ")
            if line.strip() == "/32 host LOCAL" and not address.startswith("127."):
                return address
        return None

    def close(self) -> None:
        if getattr(self, "_root", -1) >= 0:
            os.close(self._root)
            self._root = -1

    def __del__(self) -> None:
        with contextlib.suppress(OSError):
            self.close()


@dataclass(frozen=True)
class LocalView:
    """What this machine can read of a host without asking the engine: its overlay2
    directories (``fixos.stack.overlay``) and its root (``HostFiles``), each None where not."""

    layers: Layers | None = None
    files: HostFiles | None = None


def local_view(client: docker.DockerClient, container_id: str) -> LocalView:
    """The host's local view, once proven local; none under ``FIXOS_VANTAGE=inspector`` (the
    vantage of before, for A/B figures) or when the engine cannot say."""
    if os.environ.get("FIXOS_VANTAGE") == "inspector":
        return LocalView()
    try:
        inspect = client.api.inspect_container(container_id)
    except DockerException:
        return LocalView()
    layers = local_layers(inspect)
    if layers is None:
        return LocalView()
    try:
        files: HostFiles | None = HostFiles(int(inspect["State"]["Pid"]))
    except (OSError, KeyError, ValueError):
        files = None
    return LocalView(layers, files)
