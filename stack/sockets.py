"""A host's sockets read from this machine: what listens, and who holds a listener.

The kernel's socket diagnostics (``fixos.stack.sockdiag``, asked from inside the host's
network namespace) give the TCP and UDP sockets with their inodes; ``/proc/<pid>/net``
gives the UNIX ones; the host's root (``open_in_root``) gives a socket file's owner and
mode, never following a link planted there; a process's descriptors name the sockets it
holds. Each reading is what the judge's ``ss`` (``-l``, ``-p``) and ``stat`` would say,
held equal by ``tests/test_facts.py``, without a process in the judge.
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
from collections.abc import Iterable, Iterator

from . import sockdiag
from .host_files import open_in_root

UDP_UNCONNECTED = 7
"""TCP_CLOSE as a UDP socket's state: bound and not connected, so it takes from anyone."""
ACCEPTCON = 0x10000
"""``__SO_ACCEPTCON`` in a ``/proc/net/unix`` row's flags: the socket listens."""


def listening_digest(pid: int) -> bytes:
    """A digest of the listeners of ``pid``'s network namespace (TCP, UDP, UNIX), with their
    owners and inodes: TCP and UDP from the kernel's socket diagnostics where this process
    may enter the namespace (~0.3 instead of ~4.5 ms), else from the /proc tables; UNIX
    sockets from /proc (a short list)."""
    asked = sockdiag.listeners(pid)
    rows: list[tuple] = [("inet", *row) for row in asked] if asked is not None else []
    tables = ("unix",) if asked is not None else ("tcp", "tcp6", "udp", "udp6", "unix")
    for table in tables:
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii", errors="replace") as f:
                lines = f.read().splitlines()[1:]
        except OSError:
            rows.append((table, "unreadable"))
            continue
        for line in lines:
            fields = line.split()
            if table == "unix":
                if len(fields) >= 7 and int(fields[3], 16) & ACCEPTCON:
                    rows.append((table, fields[4], fields[6], fields[7] if len(fields) > 7 else ""))
            elif len(fields) >= 10 and (table.startswith("udp") or fields[3] == "0A"):
                rows.append((table, fields[1], fields[7], fields[9]))
    return hashlib.sha256(repr(sorted(rows)).encode()).digest()


def listener_lines(pid: int, root_fd: int) -> list[str] | None:
    """The listeners as ``ss -l`` names them, read now: ``tcp 0.0.0.0:80``, ``udp [::]:68``,
    and ``unix <path> <uid>:<gid> <mode>`` for a socket file (its own entry in the host's
    root ``root_fd``, never followed). None where sock_diag cannot be asked."""
    asked = sockdiag.listeners(pid)
    if asked is None:
        return None
    found = set()
    for family, protocol, state, port, address, _, _, v6only in asked:
        if protocol == socket.IPPROTO_UDP and state != UDP_UNCONNECTED:
            continue  # a connected UDP socket listens to nobody (``ss -l`` leaves it out)
        raw = bytes.fromhex(address)
        shown = socket.inet_ntop(family, raw[:4] if family == socket.AF_INET else raw)
        if family == socket.AF_INET6:  # ``ss``: * for IPv6's any address that takes IPv4 too
            shown = "*" if shown == "::" and not v6only else f"[{shown}]"
        found.add(f"{'tcp' if protocol == socket.IPPROTO_TCP else 'udp'} {shown}:{int(port, 16)}")
    try:
        with open(f"/proc/{pid}/net/unix", encoding="utf-8", errors="replace") as f:
            rows = [line.split() for line in f.read().splitlines()[1:]]
    except OSError:
        return None
    for fields in rows:
        # listening (__SO_ACCEPTCON), or not connected: what ``ss -l`` lists
        if len(fields) < 8 or not fields[7].startswith("/"):
            continue
        if not int(fields[3], 16) & ACCEPTCON and fields[5] == "03":
            continue
        try:
            handle = open_in_root(root_fd, fields[7])
        except OSError:
            continue  # its file is gone: ``stat`` says nothing of it either
        try:
            st = os.fstat(handle)
        finally:
            os.close(handle)
        found.add(f"unix {fields[7]} {st.st_uid}:{st.st_gid} {stat.S_IMODE(st.st_mode):o}")
    return sorted(found)


def unix_listens(pid: int, path: str) -> bool:
    """Whether a UNIX socket bound to ``path`` listens in ``pid``'s network namespace (its
    file can be there a moment before: ``bind`` makes it, ``listen`` comes after)."""
    try:
        with open(f"/proc/{pid}/net/unix", encoding="utf-8", errors="replace") as f:
            rows = [line.split() for line in f.read().splitlines()[1:]]
    except OSError:
        return False
    return any(len(row) == 8 and row[7] == path and int(row[3], 16) & ACCEPTCON for row in rows)


def tcp_owners(pid: int, port: int, processes: Iterable[tuple[str, bytes]]) -> list[str] | None:
    """The names (``comm``, as ``ss -p`` shows them) of the processes holding a listening TCP
    socket on ``port`` in ``pid``'s network namespace, sorted; [] when nothing listens there;
    None where sock_diag cannot be asked. ``processes``: (the path of its ``/proc`` entry,
    its stat line) of the host's processes; a socket is found by its inode among each one's
    descriptors (one that ends or closes while read is passed over, as ``ss`` would miss it)."""
    asked = sockdiag.listeners(pid)
    if asked is None:
        return None
    wanted = {row[6] for row in asked if row[1] == socket.IPPROTO_TCP and int(row[3], 16) == port}
    if not wanted:
        return []
    return sorted({comm for comm, held in _sockets_held(processes) if held & wanted})


def _sockets_held(processes: Iterable[tuple[str, bytes]]) -> Iterator[tuple[str, set[int]]]:
    """(``comm``, inodes of the sockets it holds) of each of ``processes`` (as ``tcp_owners``'s);
    one that ends or closes a descriptor while read is passed over, as ``ss`` would miss it."""
    for where, line in processes:
        try:
            descriptors = os.listdir(f"{where}/fd")
        except OSError:
            continue
        held = set()
        for fd in descriptors:
            try:
                link = os.readlink(f"{where}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                held.add(int(link[8:-1]))
        yield line[line.index(b"(") + 1 : line.rindex(b")")].decode("utf-8", "replace"), held


def servers_holding(pid: int, inodes: set[int], processes: Iterable[tuple[str, bytes]]) -> dict[int, str]:
    """inode -> ``comm`` of a server holding it, for each of ``inodes`` one holds: a server is a
    process that also holds a TCP listener of ``pid``'s network namespace (nginx's and php-fpm's
    workers, MariaDB), never a shell or client that connects from there (a check's, an agent's)."""
    listening = {row[6] for row in sockdiag.listeners(pid) or [] if row[1] == socket.IPPROTO_TCP}
    found: dict[int, str] = {}
    for comm, held in _sockets_held(processes):
        if held & listening:
            found.update(dict.fromkeys(held & inodes, comm))
    return found
