"""How this machine reaches a host's ports: on the episode's bridge, published on this
machine, or relayed.

A local engine (``unix://``, or ``tcp://`` to loopback) whose bridge for the episode's
network is one of this machine's own interfaces (its gateway address binds here) lets
this machine reach each host at the address the engine gave it: ``Bridge`` hands out
that address and the host's own ports, and the hosts publish nothing. Publishing costs
the engine a proxy process and NAT rules per port at every start and removal (about
0.08 CPU-s a host for three ports, ``make perf-price``), for ports nothing else uses.
A local engine whose bridge is not here (Docker Desktop's VM) publishes each host's
ports on 127.0.0.1 of this machine: ``Direct`` hands those out. Any other engine
(``ssh://``, ``tcp://`` elsewhere) publishes them on *its* 127.0.0.1, which this
machine cannot reach; and opening more ways in (an SSH forward per port, ports on
the engine's public address) depends on how each engine is reached. A ``Tunnel``
works for any engine through the one connection the harness already has:

- one relay container per episode, from the inspector image, on the episode's
  network (labelled like the hosts, so ``fixos clean`` and the sweep of dead runs
  remove it);
- per (host, port) a listener on this machine's 127.0.0.1;
- one long-lived ``docker exec`` in the relay (``stack/relay.py``) that carries every
  accepted connection as frames over its stdin and stdout and opens the host's port
  inside the episode's network. A connection costs a frame and a connect there, not an
  exec (over ``ssh://`` an exec is a new SSH channel and a remote ``docker system
  dial-stdio``: a few episodes at once made probes time out).

The relay never runs inside an episode's host: root there can replace any program.
Half-closes are not carried: the first side to close ends the connection; HTTP and
SSH never half-close.

``FIXOS_RELAY=1`` forces the relay for a local socket too: an engine in another
network namespace (``scripts/netns-engine``) answers on a unix socket here, but
publishes on its namespace's loopback.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import os
import socket
import threading
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import docker
from docker.errors import DockerException, NotFound

from ..core.errors import StackError
from ..core.models import HostHandle, HttpResponse
from .relay import RelaySession

RELAY_ROLE = "relay"


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
    """A local engine's ports: the handle's address (127.0.0.1 where the engine published
    them, the host's own on a bridge of this machine) and the port there."""

    publishes = True
    """whether the hosts must publish their ports for this machine to reach them"""

    def endpoint(self, handle: HostHandle, port: int) -> tuple[str, int]:
        return handle.address, handle.ports[port]

    def close(self) -> None:
        pass


class Bridge(Direct):
    """A local engine whose bridge is this machine's: hosts are reached at their own address."""

    publishes = False


def handle_of(via: Any, name: str, attrs: dict[str, Any], network: str, ports: tuple[int, ...]) -> HostHandle:
    """How this machine reaches the started container ``attrs`` through ``via``: its own
    address and ports on a bridge here or through a relay, else what the engine published."""
    settings = attrs["NetworkSettings"]
    if not via.publishes:
        return HostHandle(
            name, attrs["Id"], {p: p for p in ports}, settings["Networks"][network]["IPAddress"]
        )
    published = {
        int(key.split("/")[0]): int(bound[0]["HostPort"])
        for key, bound in (settings["Ports"] or {}).items()
        if bound
    }
    return HostHandle(name, attrs["Id"], published)


def bridge_is_here(network: Any) -> bool:
    """Whether the network's gateway (the bridge's own address) is an address of this
    machine's network namespace: then every host on it is reachable from here. Read from
    the engine, never assumed: an engine in a VM or another namespace fails the bind."""
    configs = (network.attrs.get("IPAM") or {}).get("Config") or []
    for config in configs:
        gateway = config.get("Gateway")
        if not gateway or ":" in gateway:
            continue
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind((gateway, 0))
            return True
        except OSError:
            return False
    return False


class Tunnel:
    """A relay container on ``network`` and this machine's listeners in front of it."""

    publishes = False  # the relay opens the hosts' own ports inside the episode's network

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
        self._session = RelaySession(self._api, self._relay.id)

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
        try:
            self._session.serve(conn, alias, port)
        finally:
            with self._lock:
                self._open.discard(conn)
            with contextlib.suppress(OSError):
                conn.close()

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
        self._session.close()
        with contextlib.suppress(NotFound, DockerException):
            self._relay.remove(force=True)


def reach(client: docker.DockerClient, network: Any, labels: dict[str, str], images: dict[str, str]) -> Any:
    """``Bridge`` for a local engine whose bridge is here, ``Direct`` for another local one,
    else a ``Tunnel`` on the episode's ``network``."""
    if engine_is_local(client):
        # FIXOS_PUBLISH=1: published on 127.0.0.1 even so (the way of before, for A/B figures)
        here = os.environ.get("FIXOS_PUBLISH") != "1" and bridge_is_here(network)
        return Bridge() if here else Direct()
    image = images.get("inspector")
    if image is None:
        raise StackError(
            f"a remote engine needs the inspector image for its relay (images: {sorted(images)})"
        )
    return Tunnel(client, network.name, labels, image)


def http_get(address: tuple[str, int], path: str, timeout: float = 5.0) -> HttpResponse:
    """GET ``path`` from ``address`` (a host's endpoint); status 0 and the reason when no answer."""
    url = f"http://{address[0]}:{address[1]}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return HttpResponse(resp.status, resp.read())
    except urllib.error.HTTPError as exc:
        # an error page whose body breaks off (the server resets after its headers): the
        # status stands, the body is what came; never an exception out of a check
        try:
            return HttpResponse(exc.code, exc.read() or b"")
        except (OSError, http.client.HTTPException) as cut:
            return HttpResponse(exc.code, b"", f"the body broke off: {type(cut).__name__}: {cut}")
    except (OSError, urllib.error.URLError, http.client.HTTPException) as exc:
        # a page whose body breaks off is no page served: as if nothing answered
        reason = getattr(exc, "reason", exc)
        return HttpResponse(0, b"", f"{type(reason).__name__}: {reason}", isinstance(reason, TimeoutError))
