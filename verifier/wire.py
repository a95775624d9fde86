"""MariaDB's client protocol over a connected UNIX socket, enough to ask what the checks
ask: log in as root by the socket's peer credentials (``unix_socket``), send a query,
and write what ``mariadb -N -B -e`` would print (rows tab-separated, values escaped,
``NULL``; ``ERROR <code> (<state>) at line 1: <message>`` and exit 1 on an error).

Why: a ``mariadb`` client started in the judge for each query cost ~10 CPU-ms and a
fork, a dozen times an episode; a connection from this machine asks in about a
millisecond (``Probe.sql``: one a question, never kept, as the client's were). The server may be the
agent's (root in the host can put anything on the socket), so every length is bounded
and a malformed answer is an error, never an exception.
"""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import threading
import time

from ..core.models import CommandResult

OUTPUT_LIMIT = 1 << 20
PACKET_LIMIT = 1 << 24
COLUMN_LIMIT = 4096
_CAPABILITIES = (
    0x1  # LONG_PASSWORD
    | 0x200  # PROTOCOL_41
    | 0x2000  # TRANSACTIONS
    | 0x8000  # SECURE_CONNECTION
    | 0x10000  # MULTI_STATEMENTS
    | 0x20000  # MULTI_RESULTS
    | 0x80000  # PLUGIN_AUTH
)
_MORE_RESULTS = 0x0008
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\0": "\\0"})


class WireError(Exception):
    """The conversation broke (the connection ended, an answer made no sense)."""


class MariaDB:
    """One connection, opened by ``connect`` (a function giving a connected socket) when
    first asked and again after it broke; ``query`` is what the CLI would have said."""

    def __init__(self, connect, what: str, user: str = "root", password: str = "") -> None:
        self._connect = connect
        self._what = what
        self._user = user
        self._password = password
        self._sock: socket.socket | None = None
        self._buffer = bytearray()
        """what the socket gave beyond the last packet: read in large pieces, a row listing
        costs a few system calls, not two per row (SHOW GLOBAL VARIABLES: ~650 rows)"""
        self._seq = 0
        self._turn = threading.Lock()
        self._deadline = 0.0

    def close(self) -> None:
        sock, self._sock = self._sock, None
        self._buffer.clear()
        if sock is not None:
            sock.close()

    def query(self, sql: str, *, timeout: float, connect_timeout: float | None) -> CommandResult:
        with self._turn:
            return self._query(sql, timeout, connect_timeout)

    def _query(self, sql: str, timeout: float, connect_timeout: float | None) -> CommandResult:
        started = time.monotonic()
        # one bound on the whole answer: a server that dribbles packets never holds us longer
        self._deadline = started + timeout
        command = f"mariadb -N -B -e {sql!r} (this machine, {self._what})"
        for attempt in (1, 2):
            fresh = self._sock is None
            try:
                if fresh:
                    self._open(connect_timeout or timeout)
                assert self._sock is not None
                self._sock.settimeout(max(0.1, timeout - (time.monotonic() - started)))
                output, code = "", 0
                for statement in statements(sql):  # one at a time, as the CLI sends them
                    self._send(0, b"\x03" + statement.encode("utf-8", "surrogateescape"))
                    said, code = self._results()
                    if code:  # the CLI stops there, and shows which statement failed
                        said = f"--------------\n{statement}\n--------------\n\n{said}"
                    output += said
                    if code:
                        break
            except TimeoutError:
                self.close()
                return CommandResult(command, "", 124, time.monotonic() - started, timed_out=True)
            except _Refused as exc:  # the server's own refusal: "Too many connections"
                self.close()
                return CommandResult(command, f"{exc}\n", 1, time.monotonic() - started)
            except (OSError, WireError) as exc:
                self.close()
                if fresh or attempt == 2:  # a kept connection may have died with its server: once more
                    said = f"ERROR 2002 (HY000): Can't connect to local server through socket ({exc})"
                    return CommandResult(command, said, 1, time.monotonic() - started)
                continue
            return CommandResult(command, output, code, time.monotonic() - started)
        raise AssertionError("unreachable")

    # -- the conversation -------------------------------------------------------------

    def _open(self, timeout: float) -> None:
        self._buffer.clear()
        self._sock = self._connect(timeout)
        self._sock.settimeout(timeout)
        greeting = self._packet()
        if greeting[:1] == b"\xff":
            raise _Refused(_error(greeting))
        if greeting[:1] != b"\x0a":
            raise WireError("not a MariaDB greeting")
        # root by the socket's peer credentials needs no secret; another login answers
        # the server's salt (a judge proving that a wrong password is refused)
        secret = _answer("mysql_native_password", self._password, _salt(greeting))
        reply = struct.pack("<IIB23x", _CAPABILITIES, PACKET_LIMIT, 45) + self._user.encode() + b"\0"
        self._send(self._seq + 1, reply + bytes([len(secret)]) + secret + b"mysql_native_password\0")
        while True:
            answer = self._packet()
            if answer[:1] == b"\x00":
                return
            if answer[:1] == b"\xff":
                raise _Refused(_error(answer))
            if answer[:1] == b"\xfe":  # a switch of plugin: answered as that plugin asks
                plugin, _, salt = answer[1:].partition(b"\0")
                self._send(self._seq + 1, _answer(plugin.decode("ascii", "replace"), self._password, salt))
                continue
            raise WireError("an unexpected answer to the login")

    def _results(self) -> tuple[str, int]:
        out: list[str] = []
        size = 0
        while True:
            first = self._packet()
            if first[:1] == b"\xff":
                return "".join(out) + _error(first, " at line 1") + "\n", 1
            if first[:1] == b"\x00":
                status = _ok_status(first)
            else:
                columns = _lenenc(first, 0)[0]
                if columns is None or columns > COLUMN_LIMIT:
                    raise WireError(f"{columns} columns")
                for _ in range(columns):
                    self._packet()
                self._eof()
                while True:
                    row = self._packet()
                    if row[:1] == b"\xfe" and len(row) < 9:
                        status = struct.unpack_from("<H", row, 3)[0] if len(row) >= 5 else 0
                        break
                    if row[:1] == b"\xff":
                        return "".join(out) + _error(row, " at line 1") + "\n", 1
                    line = "\t".join(_values(row, columns)) + "\n"
                    size += len(line)
                    if size > OUTPUT_LIMIT:
                        raise WireError(f"more than {OUTPUT_LIMIT} bytes of rows")
                    out.append(line)
            if not status & _MORE_RESULTS:
                return "".join(out), 0

    def _eof(self) -> None:
        if self._packet()[:1] != b"\xfe":
            raise WireError("no end of the column definitions")

    def _send(self, seq: int, payload: bytes) -> None:
        assert self._sock is not None
        self._seq = seq
        self._sock.sendall(struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload)

    def _packet(self) -> bytes:
        header = self._exactly(4)
        length = int.from_bytes(header[:3], "little")
        self._seq = header[3]
        if length >= PACKET_LIMIT - 1:
            raise WireError("a packet larger than asked for")
        return self._exactly(length)

    def _exactly(self, n: int) -> bytes:
        assert self._sock is not None
        data = self._buffer
        while len(data) < n:
            left = self._deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the answer outlived its time")
            self._sock.settimeout(min(left, self._sock.gettimeout() or left))
            chunk = self._sock.recv(max(65536, n - len(data)))
            if not chunk:
                raise WireError("the server closed the connection")
            data += chunk
        taken = bytes(data[:n])
        del data[:n]
        return taken


class _Refused(WireError):
    pass


def login(connect, user: str, password: str, timeout: float) -> str:
    """What the server says to ``user`` logging in with ``password``: ``accepted``,
    ``refused`` (access denied), ``no answer: ...`` (nothing listens, or it hung) or
    ``ERROR ...`` (any other refusal, such as too many connections)."""
    client = MariaDB(connect, "login", user, password)
    client._deadline = time.monotonic() + timeout
    try:
        client._open(timeout)
    except _Refused as exc:
        said = str(exc)
        return "refused" if said.startswith(("ERROR 1045 ", "ERROR 1698 ")) else said[:200]
    except (OSError, WireError) as exc:  # TimeoutError is an OSError
        return f"no answer: {exc}"[:200]
    finally:
        client.close()
    return "accepted"


def _salt(greeting: bytes) -> bytes:
    """The 20 bytes of scramble a greeting carries (in two parts, around its flags)."""
    at = greeting.find(b"\0", 1) + 1 + 4  # server version, connection id
    first = greeting[at : at + 8]
    at += 8 + 1 + 2 + 1 + 2 + 2  # filler, capabilities, charset, status, more capabilities
    length = greeting[at] if at < len(greeting) else 0
    at += 1 + 10
    return first + greeting[at : at + max(13, length - 8) - 1]


def _answer(plugin: str, password: str, salt: bytes) -> bytes:
    """``password`` as ``plugin`` wants it sent: nothing for no password; a plugin this
    client does not speak gets bytes no server accepts (the judge only proves refusals)."""
    if not password:
        return b""
    if plugin == "mysql_native_password":
        one = hashlib.sha1(password.encode()).digest()
        mixed = hashlib.sha1(salt.rstrip(b"\0")[:20] + hashlib.sha1(one).digest()).digest()
        return bytes(a ^ b for a, b in zip(one, mixed, strict=True))
    if plugin == "mysql_clear_password":
        return password.encode() + b"\0"
    return os.urandom(64)


def statements(sql: str) -> list[str]:
    """``sql`` cut at each ``;`` outside quotes and comments, each trimmed, as the CLI cuts it."""
    found, start, quote, i = [], 0, "", 0
    while i < len(sql):
        c = sql[i]
        if quote:
            if c == "\\" and quote != "`":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"`":
            quote = c
        elif sql.startswith("-- ", i) or c == "#":
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            i = len(sql) if end < 0 else end + 1
        elif c == ";":
            found.append(sql[start:i].strip())
            start = i + 1
        i += 1
    found.append(sql[start:].strip())
    return [s for s in found if s]


def _lenenc(data: bytes, at: int) -> tuple[int | None, int]:
    """A length-encoded integer at ``at`` (None for 0xFB, SQL's NULL) and where it ends."""
    if at >= len(data):
        raise WireError("a row shorter than its columns")
    first = data[at]
    if first < 0xFB:
        return first, at + 1
    if first == 0xFB:
        return None, at + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if width is None or at + 1 + width > len(data):
        raise WireError("a malformed length")
    return int.from_bytes(data[at + 1 : at + 1 + width], "little"), at + 1 + width


def _values(row: bytes, columns: int) -> list[str]:
    values, at = [], 0
    for _ in range(columns):
        length, at = _lenenc(row, at)
        if length is None:
            values.append("NULL")
            continue
        if at + length > len(row):
            raise WireError("a value longer than its row")
        values.append(row[at : at + length].decode("utf-8", "replace").translate(_ESCAPES))
        at += length
    return values


def _ok_status(packet: bytes) -> int:
    _, at = _lenenc(packet, 1)  # affected rows
    _, at = _lenenc(packet, at)  # last insert id
    return struct.unpack_from("<H", packet, at)[0] if at + 2 <= len(packet) else 0


def _error(packet: bytes, where: str = "") -> str:
    """The CLI's line for an error packet: ``ERROR 1146 (42S02) at line 1: Table ...``."""
    code = struct.unpack_from("<H", packet, 1)[0] if len(packet) >= 3 else 0
    if packet[3:4] == b"#":
        state, message = packet[4:9].decode("ascii", "replace"), packet[9:]
    else:
        state, message = "HY000", packet[3:]
    return f"ERROR {code} ({state}){where}: {message.decode('utf-8', 'replace')}"
