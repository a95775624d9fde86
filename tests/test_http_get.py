"""``http_get``, how checks read a host's pages: an answer whose body breaks off is never an
exception out of a check (a host reached directly on its bridge resets as it likes)."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from fixos.stack.tunnel import http_get


def _serve_once(head: bytes, body: bytes, reset: bool) -> tuple[str, int]:
    """A listener that answers one request with ``head`` and part of ``body``, then resets
    (``reset``) or closes the connection."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(head + body)
        if reset:  # SO_LINGER 0: the close sends a reset, not a FIN
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
        listener.close()

    threading.Thread(target=answer, daemon=True).start()
    return listener.getsockname()


@pytest.mark.parametrize("reset", [True, False])
def test_an_error_page_whose_body_breaks_off_keeps_its_status(reset):
    head = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 100\r\nConnection: close\r\n\r\n"
    got = http_get(_serve_once(head, b"short", reset), "/", timeout=5)
    assert got.status == 503 and got.body == b"" and "broke off" in got.error


@pytest.mark.parametrize("reset", [True, False])
def test_a_page_whose_body_breaks_off_is_no_page(reset):
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n"
    got = http_get(_serve_once(head, b"short", reset), "/", timeout=5)
    assert got.status == 0 and got.body == b"" and got.error


def test_a_whole_page_is_read():
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"
    assert http_get(_serve_once(head, b"hello", False), "/", timeout=5).body == b"hello"
