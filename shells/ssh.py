"""A persistent bash session over SSH (paramiko), to a host's published sshd port.

The same endpoint serves a plain OpenSSH client: ``ssh -i KEY -p PORT root@127.0.0.1``.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
from typing import Any

import paramiko
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

from ..core.errors import ShellError
from ..core.readiness import readable
from .session import SESSION_COMMAND, BashSession

CONNECT_TIMEOUT = 10.0


class EpisodeKey:
    """An episode's own SSH key pair (ECDSA P-256, made in a millisecond). Made with
    cryptography: paramiko's form of it, and paramiko itself, only once a session over SSH or a
    knock needs them (a command on a local engine starts without paramiko: core/deferred.py)."""

    def __init__(self) -> None:
        self._private = ec.generate_private_key(ec.SECP256R1())
        self._pkey: paramiko.PKey | None = None

    def public_line(self, comment: str = "fixos-episode") -> str:
        """The ``authorized_keys`` line."""
        blob = self._private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
        return f"{blob.decode()} {comment}"

    def private_text(self) -> str:
        """The private key as OpenSSH and paramiko read it (PEM, ``EC PRIVATE KEY``)."""
        pem = self._private.private_bytes(Encoding.PEM, PrivateFormat.TraditionalOpenSSL, NoEncryption())
        return pem.decode()

    @property
    def pkey(self) -> paramiko.PKey:
        if self._pkey is None:
            self._pkey = paramiko.ECDSAKey(vals=(self._private, self._private.public_key()))
        return self._pkey


class SshShell(BashSession):
    """``SshShell(port, key)``: root on 127.0.0.1:port, authenticated by ``key`` only."""

    def __init__(self, port: int, key: EpisodeKey, *, host: str = "127.0.0.1", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._host, self._port, self._key = host, port, key
        self._client: paramiko.SSHClient | None = None
        self._chan: paramiko.Channel | None = None
        self._open(restore=False)

    @property
    def where(self) -> str:
        return f"ssh://root@{self._host}:{self._port}"

    def _connect(self) -> paramiko.SSHClient:
        if (
            self._client is not None
            and self._client.get_transport()
            and self._client.get_transport().is_active()
        ):
            return self._client
        client = paramiko.SSHClient()
        # Each host is a throw-away container reached on loopback; there is no
        # known_hosts to pin it against.
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        try:
            client.connect(
                self._host,
                port=self._port,
                username="root",
                pkey=self._key.pkey,
                look_for_keys=False,
                allow_agent=False,
                timeout=CONNECT_TIMEOUT,
                banner_timeout=CONNECT_TIMEOUT,
                auth_timeout=CONNECT_TIMEOUT,
            )
        except (paramiko.SSHException, OSError) as exc:
            raise ShellError(f"cannot log in to {self.where}: {exc}") from exc
        self._client = client
        return client

    def _start(self) -> None:
        transport = self._connect().get_transport()
        assert transport is not None
        chan = transport.open_session(timeout=CONNECT_TIMEOUT)
        chan.set_combine_stderr(True)
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self._env.items())
        chan.exec_command(f"cd {shlex.quote(self._cwd)} && exec env -i {env} {SESSION_COMMAND}")
        self._chan = chan

    def _send(self, data: bytes) -> None:
        assert self._chan is not None
        try:
            self._chan.sendall(data)
        except (OSError, paramiko.SSHException) as exc:
            raise OSError(str(exc)) from exc

    def _read(self, wait: float) -> bytes | None:
        assert self._chan is not None
        if not self._chan.recv_ready() and not readable(self._chan, wait):
            return b""
        try:
            chunk = self._chan.recv(65536)
        except (OSError, paramiko.SSHException):
            return None
        return chunk or None

    def _side(self, script: str) -> None:
        _, stdout, _ = self._connect().exec_command(script, timeout=CONNECT_TIMEOUT)
        stdout.channel.recv_exit_status()

    def _ended_code(self) -> int:
        assert self._chan is not None
        return self._chan.recv_exit_status()

    def _stop(self) -> None:
        if self._chan is not None:
            with contextlib.suppress(socket.error, paramiko.SSHException, EOFError):
                self._chan.shutdown_write()
            self._chan.close()
            self._chan = None

    def close(self) -> None:
        super().close()
        if self._client is not None:
            self._client.close()
            self._client = None
