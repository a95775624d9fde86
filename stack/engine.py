"""The Docker engine connection: one client per engine, with a clear error when none answers."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

import docker
from docker.errors import DockerException
from docker.utils import kwargs_from_env
from requests import RequestException

from ..core.errors import EngineError

SSH_POOL_SIZE = 32  # idle connections kept per ssh:// engine (docker-py's 10 is less than -j 4 uses)


def connect(base_url: str | None = None, *, timeout: int = 120) -> docker.DockerClient:
    """A client for ``base_url`` (or DOCKER_HOST / the local socket) that has answered a ping."""
    try:
        settings = {"base_url": base_url, "tls": tls_from_env(base_url)} if base_url else kwargs_from_env()
        if settings.get("tls"):
            client: docker.DockerClient = TlsEngineClient(version="auto", timeout=timeout, **settings)
        elif base_url:
            pool = {"max_pool_size": SSH_POOL_SIZE} if base_url.startswith("ssh://") else {}
            client = docker.DockerClient(base_url=base_url, version="auto", timeout=timeout, **pool)
        else:
            client = docker.from_env(version="auto", timeout=timeout)
        share_ssh_pool(client.api)
        if client.api.base_url == "http+docker://localhost":  # docker-py's name for a unix socket
            # requests reads the proxy settings from the environment at every request (a
            # third of the client's CPU per API call); a unix socket has no proxy
            client.api.trust_env = False
        client.ping()
    except (DockerException, RequestException, OSError, ValueError) as exc:
        detail = " ".join(str(exc).split())
        detail = detail if len(detail) <= 160 else f"{detail[:157]}..."
        raise EngineError(
            f"no Docker engine answers at {engine_named(base_url)} ({type(exc).__name__}: {detail}); "
            "run `make setup` (installs and starts one when root on Debian) or start Docker"
        ) from None
    return client


def share_ssh_pool(api: docker.APIClient) -> None:
    """One pool of connections for an ``ssh://`` engine, over a socket without Nagle's delay.
    docker-py (7.x with requests >= 2.32.2) keys its pools by the whole request URL, so each
    new path (a container's, an exec's) got a pool and a connection of its own: over ssh:// a
    new SSH channel running a remote ``docker system dial-stdio`` each time, ~130 per easy_1
    episode, which is what slowed episodes side by side. Every pool of that adapter reaches
    the same engine, so all requests share one. And paramiko leaves Nagle on: a small write
    (a relay frame, a request) waited ~40 ms for the previous one's delayed ACK."""
    adapter = api.adapters.get("http+docker://ssh")
    if adapter is None:
        return

    def one_pool(request: Any, verify: Any, proxies: Any = None, cert: Any = None) -> Any:
        pool = adapter.get_connection("http+docker://ssh", proxies)  # reconnects a lost transport
        transport = adapter.ssh_client.get_transport() if adapter.ssh_client else None
        sock = getattr(transport, "sock", None)
        if isinstance(sock, socket.socket):  # not a ProxyCommand
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return pool

    adapter.get_connection_with_tls_context = one_pool


def tls_from_env(base_url: str) -> docker.tls.TLSConfig | None:
    """TLS for a ``tcp://`` engine as the docker CLI sets it up: DOCKER_TLS_VERIFY and
    DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem; default ~/.docker); None without either."""
    if not base_url.startswith(("tcp://", "https://")):
        return None
    return kwargs_from_env(environment={**os.environ, "DOCKER_HOST": base_url}).get("tls")


class EngineCaApi(docker.APIClient):
    """docker-py's API client for a TLS engine, verified by the engine's own CA whatever the
    environment says. docker-py puts that CA (DOCKER_CERT_PATH/ca.pem; or False without
    DOCKER_TLS_VERIFY) in ``self.verify``, but requests lets REQUESTS_CA_BUNDLE or
    CURL_CA_BUNDLE replace it on every request, so a user with either set (common behind a
    corporate proxy) could not reach the engine. Proxies from the environment still apply."""

    def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any) -> Any:
        settings = super().merge_environment_settings(url, proxies, stream, verify, cert)
        settings["verify"] = self.verify
        return settings


class TlsEngineClient(docker.DockerClient):
    """A DockerClient over ``EngineCaApi`` (it asks the engine's API version already in __init__)."""

    def __init__(self, **kwargs: Any) -> None:
        self.api = EngineCaApi(**kwargs)


def engine_named(base_url: str | None) -> str:
    """Which engine was tried, as the user said it: the option, DOCKER_HOST, or the default socket."""
    if base_url:
        return f"--docker-host {base_url}"
    if os.environ.get("DOCKER_HOST"):
        return f"DOCKER_HOST={os.environ['DOCKER_HOST']}"
    return "the local Docker socket (unix:///var/run/docker.sock; set DOCKER_HOST for another)"


@dataclass
class Engine:
    """One Docker engine a run spreads episodes over, with the image tags present on it."""

    url: str
    """as given (``unix://…``, ``tcp://…``, ``ssh://…``), or ``local`` for DOCKER_HOST / the socket."""
    client: docker.DockerClient
    images: dict[str, str]


def shares(total: int, engines: int) -> list[int]:
    """``total`` episodes at a time split over engines as evenly as it goes (earlier ones get the rest)."""
    base, rest = divmod(total, engines)
    return [base + (1 if i < rest else 0) for i in range(engines)]
