"""How this machine reaches a host's ports: published on this machine, or relayed.

A local engine (``unix://``, or ``tcp://`` to loopback) publishes each host's
ports on 127.0.0.1 of this machine: ``Direct`` hands those out. Any other engine
(``ssh://``, ``tcp://`` elsewhere) publishes them on *its* 127.0.0.1, which this
machine cannot reach; and opening more ways in (an SSH forward per port, ports on
the engine's public address) depends on how each engine is reached. A ``Tunnel``
works for any engine through the one connection the harness already has:

- one relay container per episode, from the inspector image, on the episode's
  network (labelled like the hosts, so ``fixos clean`` and the sweep of dead runs
  remove it);
- per (host, port) a listener on this machine's 127.0.0.1;
- per accepted connection one ``docker exec`` in the relay running bash, which
  opens ``/dev/tcp/<host alias>/<port>`` and copies bytes both ways; this side
  pumps between the accepted socket and the exec's attached stream.

The relay never runs inside an episode's host: root there can replace any program.
Half-closes are not carried (bash cannot shut down half a socket): the first side
to close ends the connection; HTTP and SSH never half-close.

``FIXOS_RELAY=1`` forces the relay for a local socket too: an engine in another
network namespace (``scripts/netns-engine``) answers on a unix socket here, but
publishes on its namespace's loopback.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import select
import socket
import struct
import threading
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import docker
from docker.errors import DockerException, NotFound

from fixos.core.errors import StackError
from fixos.core.models import HostHandle, HttpResponse

RELAY_ROLE = "relay"
# $1 host alias, $2 port. Two copiers; when either ends (a side closed) so does the relay.
# stdin goes through fd 4: bash gives a background command /dev/null as its stdin.
RELAY_SCRIPT = (
    'exec 3<>"/dev/tcp/$1/$2" 4<&0 || exit 111; cat <&3 & r=$!; cat <&4 >&3 & w=$!; '
    "wait -n; kill $r $w 2>/dev/null; exit 0"
)
CHUNK = 65536


def engine_is_local(client: docker.DockerClient) -> bool:
    """Whether the engine's published ports are on this machine's 127.0.0.1."""
    if os.environ.get("FIXOS_RELAY") == "1":
        return False
    base = client.api.base_url
    if base.startswith("http+docker://"):  # unix socket or named pipe; ssh is http+docker://ssh
        return not base.startswith("http+docker://ssh")
    host = urlsplit(base).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Direct:
    """A local engine's ports: 127.0.0.1 and the port the engine published."""

    def endpoint(self, handle: HostHandle, port: int) -> tuple[str, int]:
        return "127.0.0.1", handle.ports[port]

    def close(self) -> None:
        pass


class Tunnel:
    """A relay container on ``network`` and this machine's listeners in front of it."""

    def __init__(self, client: docker.DockerClient, network: str, labels: dict[str, str], image: str) -> None:
        self._api = client.api
        self._lock = threading.Lock()
        self._listeners: dict[tuple[str, int], socket.socket] = {}
        self._open: set[socket.socket] = set()
        self._closed = False
        try:
            self._relay = client.containers.run(
                image,
                detach=True,
                name=f"{network}-{RELAY_ROLE}",
                labels={**labels, "fixos.role": RELAY_ROLE},
                network=network,
                read_only=True,
                tmpfs={"/tmp": "size=1m"},
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                mem_limit="64m",
                pids_limit=256,
            )
        except DockerException as exc:
            raise StackError(f"cannot start the relay on {network}: {exc}") from None

    def endpoint(self, handle: HostHandle, port: int) -> tuple[str, int]:
        """A listener on this machine that reaches ``port`` of the host named ``handle.name``."""
        if port not in handle.ports:
            raise KeyError(port)
        key = (handle.name, port)
        with self._lock:
            if self._closed:
                raise StackError("the relay of this episode is closed")
            listener = self._listeners.get(key)
            if listener is None:
                listener = socket.create_server(("127.0.0.1", 0), backlog=64)
                self._listeners[key] = listener
                threading.Thread(target=self._accept, args=(listener, *key), daemon=True).start()
        return "127.0.0.1", listener.getsockname()[1]

    def _accept(self, listener: socket.socket, alias: str, port: int) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn, alias, port), daemon=True).start()

    def _serve(self, conn: socket.socket, alias: str, port: int) -> None:
        with self._lock:
            if self._closed:
                conn.close()
                return
            self._open.add(conn)
        raw: Any = None
        try:
            exec_id = self._api.exec_create(
                self._relay.id,
                ["bash", "-c", RELAY_SCRIPT, "relay", alias, str(port)],
                stdin=True,
                stdout=True,
                stderr=False,
                tty=False,
            )["Id"]
            raw = self._api.exec_start(exec_id, socket=True)
            _pump(conn, getattr(raw, "_sock", raw))
        except (DockerException, OSError):
            pass  # the client sees its connection close, as with a refused port
        finally:
            with self._lock:
                self._open.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()
            if raw is not None:
                with contextlib.suppress(Exception):
                    raw.close()

    def close(self) -> None:
        """Stop listening, cut open connections, remove the relay; safe to call twice."""
        with self._lock:
            self._closed = True
            listeners, self._listeners = list(self._listeners.values()), {}
            conns, self._open = list(self._open), set()
        for sock in listeners + conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        with contextlib.suppress(NotFound, DockerException):
            self._relay.remove(force=True)


def _pump(conn: socket.socket, stream: Any) -> None:
    """Copy bytes both ways until either side closes. ``stream`` is the exec's attached
    connection (a socket, or a paramiko channel over ssh://): what goes in is the relay's
    stdin as is, what comes out is framed (8-byte header: stream, length) as docker does
    without a TTY."""
    frames = bytearray()
    while True:
        ready, _, _ = select.select([conn, stream], [], [])
        if conn in ready:
            data = conn.recv(CHUNK)
            if not data:
                return
            stream.sendall(data)
        if stream in ready:
            data = stream.recv(CHUNK)
            if not data:
                return
            frames += data
            while len(frames) >= 8:
                _kind, size = struct.unpack(">BxxxL", frames[:8])
                if len(frames) < 8 + size:
                    break
                conn.sendall(bytes(frames[8 : 8 + size]))
                del frames[: 8 + size]


def reach(client: docker.DockerClient, network: str, labels: dict[str, str], images: dict[str, str]) -> Any:
    """``Direct`` for a local engine, else a ``Tunnel`` on the episode's ``network``."""
    if engine_is_local(client):
        return Direct()
    image = images.get("inspector")
    if image is None:
        raise StackError(
            f"a remote engine needs the inspector image for its relay (images: {sorted(images)})"
        )
    return Tunnel(client, network, labels, image)


def http_get(address: tuple[str, int], path: str, timeout: float = 5.0) -> HttpResponse:
    """GET ``path`` from ``address`` (a host's endpoint); status 0 and the reason when no answer."""
    url = f"http://{address[0]}:{address[1]}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return HttpResponse(resp.status, resp.read())
    except urllib.error.HTTPError as exc:
        return HttpResponse(exc.code, exc.read() or b"")
    except (OSError, urllib.error.URLError) as exc:
        reason = getattr(exc, "reason", exc)
        return HttpResponse(0, b"", f"{type(reason).__name__}: {reason}")
