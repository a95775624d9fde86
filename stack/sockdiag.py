"""A network namespace's TCP listeners and UDP sockets, asked of the kernel through
``sock_diag`` netlink (``man 7 sock_diag``) rather than read from ``/proc/<pid>/net/tcp``.

Why: to print ``/proc/<pid>/net/tcp`` the kernel walks its whole established-connection
hash for the namespace (262,144 buckets here, ~2 ms for an empty namespace, and tcp6 as
much again); a dump filtered on the LISTEN state walks only the listening hash (~0.1 ms).
A running score reads every host's listeners at every step. ``connections`` reads the
connections a sender waits in, with each one's ``tcp_info`` (``fixos.verifier.held``: a page
held by the network); that dump does walk the whole hash, ~1.5 ms a namespace.

The netlink socket must be made inside the host's network namespace: a short-lived thread
of this process enters it (``setns``, which needs ``CAP_SYS_ADMIN``; it changes only that
thread), makes the socket, and ends; the socket stays bound to that namespace. Where that
is refused, ``listeners`` returns None and the caller reads ``/proc`` as before.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import socket
import struct
import threading

from ..core.models import Connection

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
CLONE_NEWNET = 0x40000000
TCP_LISTEN = 10
INET_DIAG_SKV6ONLY = 11
"""an IPv6 socket's attribute: 1 when it takes no IPv4 (``ss`` shows its any address as [::], else *)."""
_HEADER = struct.Struct("=IHHII")  # nlmsghdr
_REQUEST = struct.Struct("=BBBxI48x")  # inet_diag_req_v2, with an empty inet_diag_sockid
_MESSAGE = struct.Struct("=BBBB2s2s16s16sI8sIIIII")  # inet_diag_msg
_ASKED = (
    (socket.AF_INET, socket.IPPROTO_TCP, 1 << TCP_LISTEN),
    (socket.AF_INET6, socket.IPPROTO_TCP, 1 << TCP_LISTEN),
    (socket.AF_INET, socket.IPPROTO_UDP, 0xFFFFFFFF),
    (socket.AF_INET6, socket.IPPROTO_UDP, 0xFFFFFFFF),
)
_libc = ctypes.CDLL(None, use_errno=True)


def socket_in(pid: int, family: int, kind: int, protocol: int = 0) -> socket.socket | None:
    """A socket made in ``pid``'s network namespace (to reach what listens there, its
    loopback too), or None where entering it is refused."""
    made: list[socket.socket] = []

    def enter_and_make() -> None:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                return
            made.append(socket.socket(family, kind | socket.SOCK_CLOEXEC, protocol))
        finally:
            os.close(fd)

    # The thread ends in the host's namespace: it is never reused (a plain Thread, not a pool's).
    thread = threading.Thread(target=enter_and_make, name=f"netns-{pid}", daemon=True)
    thread.start()
    thread.join()
    return made[0] if made else None


def _socket_in(pid: int) -> socket.socket | None:
    """A sock_diag socket made in ``pid``'s network namespace, or None where entering it is refused."""
    return socket_in(pid, socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG)


def _messages(sock: socket.socket, family: int, protocol: int, states: int, seq: int, ext: int = 0):
    """Each socket the kernel dumps: its ``inet_diag_msg`` fields and its attributes' bytes."""
    body = _REQUEST.pack(family, protocol, ext, states)
    flags = NLM_F_REQUEST | NLM_F_DUMP
    sock.send(_HEADER.pack(_HEADER.size + len(body), SOCK_DIAG_BY_FAMILY, flags, seq, 0) + body)
    while True:
        data = sock.recv(65536)
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
            if kind == NLMSG_DONE:
                return
            if kind == NLMSG_ERROR:
                (code,) = struct.unpack_from("=i", data, offset + _HEADER.size)
                raise OSError(-code, os.strerror(-code))
            if length < _HEADER.size:
                raise OSError("sock_diag: a message shorter than its header")
            start = offset + _HEADER.size + _MESSAGE.size
            yield _MESSAGE.unpack_from(data, offset + _HEADER.size), data[start : offset + length]
            offset += (length + 3) & ~3


def _dump(sock: socket.socket, family: int, protocol: int, states: int, seq: int) -> list[tuple]:
    rows = []
    for fields, attributes in _messages(sock, family, protocol, states, seq):
        family_, state, _, _, sport, _, src, _, _, _, _, _, _, uid, inode = fields
        v6only = _attribute(attributes, INET_DIAG_SKV6ONLY)
        only = bool(v6only and v6only[0])
        rows.append((family_, protocol, state, sport.hex(), src.hex(), uid, inode, only))
    return rows


def _attribute(data: bytes, wanted: int) -> bytes | None:
    """The payload of the first netlink attribute of type ``wanted`` in ``data``."""
    offset = 0
    while offset + 4 <= len(data):
        length, kind = struct.unpack_from("=HH", data, offset)
        if length < 4:
            return None
        if kind == wanted:
            return data[offset + 4 : offset + length]
        offset += (length + 3) & ~3
    return None


def listeners(pid: int) -> list[tuple] | None:
    """Every TCP listener and UDP socket of ``pid``'s network namespace: (family, protocol,
    state, port, address, owner uid, inode, IPv6 only), sorted; None where sock_diag cannot be asked
    there (the caller reads ``/proc/<pid>/net`` instead)."""
    sock = _socket_in(pid)
    if sock is None:
        return None
    try:
        sock.settimeout(2.0)
        rows = []
        for seq, (family, protocol, states) in enumerate(_ASKED, 1):
            rows.extend(_dump(sock, family, protocol, states, seq))
        return sorted(rows)
    except OSError:
        return None
    finally:
        sock.close()


INET_DIAG_INFO = 2
"""a TCP socket's ``struct tcp_info`` (``linux/tcp.h``), asked with ``ext`` bit ``1 << (2 - 1)``."""
_TCP_INFO = struct.Struct("=BBBBBBBx4I5I4I")  # up to tcpi_last_ack_recv: all a stall needs
RETRANSMIT_TIMER = 1
"""``idiag_timer`` when the retransmission timer (or a loss probe's) is pending."""
_IN_FLIGHT_STATES = sum(1 << s for s in (1, 2, 4, 5, 8, 9, 11))
"""ESTABLISHED, SYN_SENT, FIN_WAIT1-2, CLOSE_WAIT, LAST_ACK, CLOSING: the states a sender waits in
(not LISTEN, TIME_WAIT, CLOSE, nor SYN_RECV, whose request sockets carry no tcp_info)."""


def _endpoint(family: int, address: bytes, port: bytes) -> str:
    raw = address[:4] if family == socket.AF_INET else address
    shown, number = ipaddress.ip_address(raw), int.from_bytes(port, "big")
    return f"{shown}:{number}" if shown.version == 4 else f"[{shown}]:{number}"


def connections(pid: int) -> list[Connection] | None:
    """Every TCP connection of ``pid``'s network namespace in a state where a sender waits for
    its peer, with what its kernel's TCP knows of the wait; None where sock_diag cannot be
    asked there. Walks the machine's established-connection hash: ~1.5 ms a namespace."""
    sock = _socket_in(pid)
    if sock is None:
        return None
    found = []
    try:
        sock.settimeout(2.0)
        ext = 1 << (INET_DIAG_INFO - 1)
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), 1):
            asked = _messages(sock, family, socket.IPPROTO_TCP, _IN_FLIGHT_STATES, seq, ext)
            for fields, attributes in asked:
                family_, state, timer, _, sport, dport, src, dst, _, _, expires, *_, inode = fields
                info = _attribute(attributes, INET_DIAG_INFO)
                if info is None or len(info) < _TCP_INFO.size:
                    continue
                tcp = _TCP_INFO.unpack_from(info)
                local, remote = _endpoint(family_, src, sport), _endpoint(family_, dst, dport)
                ran = max(0, tcp[7] // 1000 - expires) if timer == RETRANSMIT_TIMER else 0  # tcpi_rto: us
                # tcp[2] retransmits; tcp[11] unacked; tcp[16] last_data_sent; tcp[19] last_ack_recv
                found.append(Connection(local, remote, state, inode, tcp[2], tcp[11], tcp[16], tcp[19], ran))
        return found
    except OSError:
        return None
    finally:
        sock.close()
