"""``verifier/wire.py`` against servers that are not MariaDB: root in a host can put anything
on its socket. Every answer is an error or a time-out within the bound, never an exception
or a wait past it. (Its answers from a real MariaDB are held equal to the ``mariadb``
client's in ``tests/test_facts.py``.)"""

from __future__ import annotations

import socket
import struct
import threading
import time

from fixos.verifier.wire import MariaDB, statements


def _packet(seq: int, payload: bytes) -> bytes:
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


def _served(script) -> MariaDB:
    """A client whose every connection is served by ``script(sock)`` in a thread."""

    def connect(timeout: float) -> socket.socket:
        ours, theirs = socket.socketpair()
        threading.Thread(target=script, args=(theirs,), daemon=True).start()
        return ours

    return MariaDB(connect, "a test server")


def test_a_refusal_at_the_greeting_is_the_servers_own_words():
    def busy(sock):
        sock.sendall(_packet(0, b"\xff" + struct.pack("<H", 1040) + b"#08004Too many connections"))

    out = _served(busy).query("SELECT 1", timeout=2, connect_timeout=1)
    assert out.exit_code == 1 and out.output == "ERROR 1040 (08004): Too many connections\n", out


def test_a_server_that_dribbles_is_cut_off_at_the_bound():
    def dribble(sock):
        with sock:
            for _ in range(400):
                try:
                    sock.sendall(b"\x01")
                except OSError:
                    return
                time.sleep(0.01)

    started = time.monotonic()
    out = _served(dribble).query("SELECT 1", timeout=0.5, connect_timeout=None)
    assert out.timed_out and out.exit_code == 124 and time.monotonic() - started < 1.5, out


def test_nonsense_is_an_error_not_an_exception():
    def nonsense(sock):
        with sock:
            sock.sendall(_packet(0, b"HTTP/1.1 400 Bad Request\r\n"))

    out = _served(nonsense).query("SELECT 1", timeout=2, connect_timeout=1)
    assert out.exit_code == 1 and "Can't connect" in out.output, out


def test_statements_are_cut_as_the_client_cuts_them():
    assert statements("SELECT 1; SELECT ';' -- a; comment\n; /* ; */ SELECT `a;b`;") == [
        "SELECT 1",
        "SELECT ';' -- a; comment",
        "/* ; */ SELECT `a;b`",
    ]
    assert statements("SELECT 'it''s; fine', \"x\\\";y\"") == ["SELECT 'it''s; fine', \"x\\\";y\""]
    assert statements(" ; ;") == []


def test_a_login_answers_the_servers_salt_and_a_wrong_password_is_refused():
    """A server checking ``mysql_native_password`` as MariaDB does, against the hash it
    stores: only the right password is accepted; a stranger with none is refused; an
    answer that is no refusal and no welcome is said as the server said it."""
    import hashlib
    import os as _os

    from fixos.verifier.wire import login

    stored = hashlib.sha1(hashlib.sha1(b"tidewater-4821").digest()).digest()

    def server(sock):
        with sock:
            salt = _os.urandom(20).replace(b"\0", b"\1")
            greeting = (
                b"\x0a11.0.0-MariaDB\0"
                + struct.pack("<I", 7)
                + salt[:8]
                + b"\0"
                + struct.pack("<HBHH", 0xF7FF, 45, 2, 0x81BF)
                + bytes([21])
                + b"\0" * 10
                + salt[8:]
                + b"\0"
                + b"mysql_native_password\0"
            )
            sock.sendall(_packet(0, greeting))
            header = sock.recv(4)
            body = sock.recv(int.from_bytes(header[:3], "little"))
            user, _, rest = body[32:].partition(b"\0")
            answer = rest[1 : 1 + rest[0]]
            # the server's side: SHA1(password) = answer XOR SHA1(salt + stored)
            mixed = hashlib.sha1(salt + stored).digest()
            ok = (
                len(answer) == 20
                and hashlib.sha1(bytes(a ^ b for a, b in zip(answer, mixed, strict=False))).digest() == stored
            )
            if user == b"busy":
                sock.sendall(_packet(2, b"\xff" + struct.pack("<H", 1040) + b"#08004Too many connections"))
            elif user == b"shop" and ok:
                sock.sendall(_packet(2, b"\x00\x00\x00\x02\x00\x00\x00"))
            else:
                sock.sendall(_packet(2, b"\xff" + struct.pack("<H", 1045) + b"#28000Access denied"))

    def connect(timeout):
        ours, theirs = socket.socketpair()
        threading.Thread(target=server, args=(theirs,), daemon=True).start()
        return ours

    assert login(connect, "shop", "tidewater-4821", 2) == "accepted"
    assert login(connect, "shop", "tidewater-4822", 2) == "refused"
    assert login(connect, "shop", "", 2) == "refused"
    assert login(connect, "fixos-stranger", "", 2) == "refused"
    assert login(connect, "busy", "x", 2) == "ERROR 1040 (08004): Too many connections"

    def silent(timeout):
        ours, _theirs = socket.socketpair()
        silent.kept = _theirs
        return ours

    started = time.monotonic()
    assert login(silent, "shop", "x", 0.3).startswith("no answer")
    assert time.monotonic() - started < 1.5
