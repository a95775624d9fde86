"""One docker exec in an episode's relay container that carries all its relayed connections.

A connection through the relay used to cost its own ``docker exec`` (create + a hijacked
start), and over ``ssh://`` docker-py opens a new SSH channel running a remote ``docker
system dial-stdio`` for each: a few episodes at once made probes time out. Now the relay
runs one long-lived program (Perl: the inspector image has perl-base and no python3; the
program goes on the exec's command line, so the image is unchanged) and both ends speak a
small framed protocol over that exec's stdin and stdout:

    frame = connection id (u32) | kind (u8) | length (u32) | payload    (big endian)
    OPEN  this side -> relay, payload "alias port": connect (non-blocking) to that port
    DATA  either way, bytes of that connection
    CLOSE either way: the connection is over (refused, closed or cut), both directions

A connection costs one frame and a connect inside the episode's network. The first side to
close ends a connection (no half-close; HTTP and SSH never half-close), as with the
``bash /dev/tcp`` relay before. If the exec dies (the engine connection broke), its open
connections close and the next connection starts a new exec.
"""

from __future__ import annotations

import contextlib
import itertools
import select
import socket
import ssl
import struct
import threading
from typing import Any

from docker.errors import DockerException

from ..core.readiness import readable

OPEN, DATA, CLOSE = 1, 2, 3
HEADER = struct.Struct(">IBI")
CHUNK = 65536
STALL_SECONDS = 30  # a local client that reads nothing for this long loses its connection, not the session

# The relay's end: one select loop over stdin, stdout and the connections it opened; it stops
# reading connections while more than 4 MB wait for stdout, so a slow engine link cannot fill
# the relay's 64 MB.
RELAY_PROGRAM = r"""
use strict; use warnings; use IO::Socket::INET; use Socket qw(SOL_SOCKET SO_ERROR IPPROTO_TCP TCP_NODELAY);
binmode STDIN; binmode STDOUT; STDIN->blocking(0); STDOUT->blocking(0);
my ($in, $out) = ('', ''); my (%sock, %pending, %connecting);
sub frame { my ($id, $kind, $data) = @_; $data //= '';
  $out .= pack('NCN', $id, $kind, length $data) . $data; }
sub drop { my ($id, $tell) = @_; my $s = delete $sock{$id} or return;
  delete $pending{$id}; delete $connecting{$id}; close $s; frame($id, 3) if $tell; }
while (1) {
  my ($r, $w) = ('', '');
  vec($r, fileno(STDIN), 1) = 1;
  vec($w, fileno(STDOUT), 1) = 1 if length $out;
  for my $id (keys %sock) { my $fd = fileno $sock{$id};
    vec($w, $fd, 1) = 1 if $connecting{$id} || length $pending{$id};
    vec($r, $fd, 1) = 1 if !$connecting{$id} && length $out < 4194304; }
  select($r, $w, undef, undef) > 0 or next;
  if (vec($r, fileno(STDIN), 1)) {
    my $n = sysread(STDIN, $in, 65536, length $in);
    exit 0 if defined $n && $n == 0;
    while (length $in >= 9) {
      my ($id, $kind, $len) = unpack('NCN', $in); last if length $in < 9 + $len;
      my $data = substr($in, 9, $len); substr($in, 0, 9 + $len) = '';
      if ($kind == 1) { my ($alias, $port) = split / /, $data;
        my $s = IO::Socket::INET->new(PeerAddr => $alias, PeerPort => $port, Proto => 'tcp', Blocking => 0);
        if ($s) { setsockopt($s, IPPROTO_TCP, TCP_NODELAY, 1);
          $sock{$id} = $s; $pending{$id} = ''; $connecting{$id} = 1 } else { frame($id, 3) } }
      elsif ($kind == 2) { $pending{$id} .= $data if $sock{$id} }
      elsif ($kind == 3) { drop($id, 0) } } }
  for my $id (keys %sock) { my $s = $sock{$id} or next; my $fd = fileno $s;
    if (vec($w, $fd, 1)) {
      if ($connecting{$id}) { if ($s->sockopt(SO_ERROR)) { drop($id, 1); next } delete $connecting{$id} }
      if (length $pending{$id}) { my $n = syswrite($s, $pending{$id});
        if (defined $n) { substr($pending{$id}, 0, $n) = '' } elsif (!$!{EAGAIN}) { drop($id, 1); next } } }
    if (vec($r, $fd, 1)) { my $n = sysread($s, my $buf, 65536);
      if (defined $n && $n > 0) { frame($id, 2, $buf) } elsif (!defined $n && $!{EAGAIN}) { }
      else { drop($id, 1) } } }
  if (length $out && vec($w, fileno(STDOUT), 1)) { my $n = syswrite(STDOUT, $out);
    if (defined $n) { substr($out, 0, $n) = '' } elsif (!$!{EAGAIN}) { exit 1 } }
}
"""


class RelaySession:
    """This side of the relay's one exec: hands each local connection an id and pumps its bytes."""

    def __init__(self, api: Any, container_id: str) -> None:
        self._api = api
        self._container = container_id
        self._lock = threading.Lock()  # the session itself (start, replace) and the connection table
        # writes of the exec's stream: one frame at a time; and an SSL stream's reads (_recv)
        self._io_lock = threading.Lock()
        self._stream: Any = None
        self._raw: Any = None
        self._conns: dict[int, socket.socket] = {}
        self._ids = itertools.count(1)
        self._closed = False

    def serve(self, conn: socket.socket, alias: str, port: int) -> None:
        """Relay ``conn`` to ``alias:port`` in the episode's network until either side closes."""
        try:
            stream, cid = self._open(conn)
        except (DockerException, OSError):
            with contextlib.suppress(OSError):
                conn.close()  # the client sees its connection close, as with a refused port
            return
        try:
            # frames arrive as the far end wrote them: small writes must not wait for an ACK (Nagle)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._send(stream, cid, OPEN, f"{alias} {port}".encode())
            while data := conn.recv(CHUNK):
                self._send(stream, cid, DATA, data)
            self._send(stream, cid, CLOSE)
        except OSError:
            with contextlib.suppress(OSError):
                self._send(stream, cid, CLOSE)
        finally:
            self._forget(cid)

    def _open(self, conn: socket.socket) -> tuple[Any, int]:
        with self._lock:
            if self._closed:
                raise OSError("the relay session is closed")
            if self._stream is None:
                self._start()
            cid = next(self._ids)
            self._conns[cid] = conn
            return self._stream, cid

    def _start(self) -> None:
        exec_id = self._api.exec_create(
            self._container,
            ["perl", "-e", RELAY_PROGRAM],
            stdin=True,
            stdout=True,
            stderr=False,
            tty=False,
        )["Id"]
        raw = self._api.exec_start(exec_id, socket=True)
        stream = getattr(raw, "_sock", raw)
        stream.settimeout(None)  # idle between probes is normal: never time the session out
        self._raw, self._stream = raw, stream
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _send(self, stream: Any, cid: int, kind: int, data: bytes = b"") -> None:
        with self._io_lock:
            if isinstance(stream, ssl.SSLSocket):
                stream.settimeout(None)  # the reader leaves it non-blocking
            stream.sendall(HEADER.pack(cid, kind, len(data)) + data)

    def _recv(self, stream: Any) -> bytes:
        """Bytes from the exec. A socket or a paramiko channel is read by this thread while others
        write; an SSL socket (tcp+TLS) must not be used by two threads at once, so it is read
        without blocking under the writers' lock once select (or its own buffer) says so."""
        if not isinstance(stream, ssl.SSLSocket):
            return stream.recv(CHUNK)
        while True:
            if not stream.pending():
                readable(stream, None)
            with self._io_lock:
                stream.settimeout(0.0)
                try:
                    return stream.recv(CHUNK)
                except (ssl.SSLWantReadError, BlockingIOError):
                    continue  # a partial record, or no application data: wait for more

    def _read(self, stream: Any) -> None:
        """Deframe docker's stdout frames (8-byte header) and then the relay's frames."""
        docker_buf, buf = bytearray(), bytearray()
        try:
            while chunk := self._recv(stream):
                docker_buf += chunk
                while len(docker_buf) >= 8:
                    _kind, size = struct.unpack(">BxxxL", docker_buf[:8])
                    if len(docker_buf) < 8 + size:
                        break
                    buf += docker_buf[8 : 8 + size]
                    del docker_buf[: 8 + size]
                while len(buf) >= HEADER.size:
                    cid, kind, size = HEADER.unpack(buf[: HEADER.size])
                    if len(buf) < HEADER.size + size:
                        break
                    self._deliver(stream, cid, kind, bytes(buf[HEADER.size : HEADER.size + size]))
                    del buf[: HEADER.size + size]
        except OSError:
            pass
        self._lost(stream)

    def _deliver(self, stream: Any, cid: int, kind: int, data: bytes) -> None:
        with self._lock:
            conn = self._conns.get(cid)
        if conn is None:
            return  # this side already closed it
        if kind == DATA:
            try:
                _send_local(conn, data)
                return
            except OSError:
                with contextlib.suppress(OSError):
                    self._send(stream, cid, CLOSE)
        self._forget(cid)  # CLOSE, or the local client is gone or stalled

    def _forget(self, cid: int) -> None:
        with self._lock:
            conn = self._conns.pop(cid, None)
        if conn is not None:
            _cut(conn)

    def _lost(self, stream: Any) -> None:
        """The exec ended: close what it carried; the next connection starts a new one."""
        with self._lock:
            if self._stream is not stream:
                return
            conns, self._conns = list(self._conns.values()), {}
            raw, self._stream, self._raw = self._raw, None, None
        for conn in conns:
            _cut(conn)
        with contextlib.suppress(Exception):
            raw.close()

    def close(self) -> None:
        """Cut every connection and end the exec (the relay program exits on EOF)."""
        with self._lock:
            self._closed = True
            conns, self._conns = list(self._conns.values()), {}
            stream, raw, self._stream, self._raw = self._stream, self._raw, None, None
        for conn in conns:
            _cut(conn)
        for end in (stream, raw):
            if end is not None:
                with contextlib.suppress(Exception):
                    end.close()


def _send_local(conn: socket.socket, data: bytes) -> None:
    """``sendall`` that gives up on a client reading nothing for STALL_SECONDS (its receive
    side may idle for as long as it likes: an agent thinking keeps its SSH connection)."""
    view, poller = memoryview(data), select.poll()
    poller.register(conn, select.POLLOUT)
    while view:
        if not poller.poll(STALL_SECONDS * 1000):
            raise TimeoutError("the local client reads nothing")
        with contextlib.suppress(BlockingIOError):
            view = view[conn.send(view, socket.MSG_DONTWAIT) :]


def _cut(conn: socket.socket) -> None:
    with contextlib.suppress(OSError):
        conn.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        conn.close()
