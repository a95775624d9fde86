"""The shop's HTTPS: a certificate authority of the episode's own, and its certificates on the host.

At stack up, once nginx is up with the image's placeholder pair, the harness makes a
CA (its private key exists only in this process's memory, never in any host), issues
the site's certificate and the few others an operator's ``/etc/ssl/shop`` holds (the
previous, expired one; the staging site's), writes them with the CA's certificate,
and reloads nginx; the host counts as ready once 443 serves the new certificate.
The verifier trusts ``LiveHost.tls.ca_pem``, this process's copy, never a file of the host.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import io
import socket
import ssl
import tarfile
import time
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..core.errors import StackError
from ..shells.base import Shell

SITE_NAME = "shop.tidewater.test"
STAGING_NAME = "staging.tidewater.test"
TLS_DIR = "/etc/ssl/shop"
INSTALL_TIMEOUT = 20.0

_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Validity:
    """When a host's certificates are issued, and how long its live ones (the CA, the site's
    current one, the staging site's) last. An episode's live for 90 days from its stack up, as
    an operator's would; an exported task's are issued once, at export, and must outlive it."""

    days: int = 90
    issued: datetime.datetime | None = None
    """None: now."""

    def start(self) -> datetime.datetime:
        return (self.issued or datetime.datetime.now(datetime.UTC)).replace(microsecond=0)


EPISODE_VALIDITY = Validity()


@dataclass(frozen=True)
class SiteTls:
    """What the harness keeps of a host's HTTPS: the CA to verify against, never its key."""

    name: str
    ca_pem: str
    address: tuple[str, int]
    """where this machine reaches the host's 443 (``LiveHost.endpoint``)"""
    fingerprint: str
    """sha256 of the site certificate installed at stack up (DER)"""


class EpisodeCA:
    """A CA made for one host's stack; the key stays in this object."""

    def __init__(self, label: str, validity: Validity = EPISODE_VALIDITY) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = validity.start()
        name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Tidewater Supply"),
                x509.NameAttribute(NameOID.COMMON_NAME, f"Tidewater Supply CA {label}"[:64]),
            ]
        )
        self.name = name
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY)
            .not_valid_after(now + max(3650, validity.days) * _DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_usage(ca=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )

    def pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()

    def issue(
        self, dns_name: str, key: ec.EllipticCurvePrivateKey, not_before: datetime.datetime, days: int
    ) -> x509.Certificate:
        """A server certificate for ``dns_name`` over ``key``'s public half."""
        ca_public = self._key.public_key()
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_name)]))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_before + days * _DAY)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(dns_name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(_usage(ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_public), critical=False)
            .sign(self._key, hashes.SHA256())
        )


def _usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def site_files(
    ca: EpisodeCA, validity: Validity = EPISODE_VALIDITY
) -> tuple[dict[str, tuple[bytes, int]], x509.Certificate]:
    """Path -> (content, mode) of everything /etc/ssl/shop holds, and the site's certificate.

    The previous certificate (expired a month before issue) shares the current key, as a
    renewal that kept its key leaves it; the staging site has a pair of its own.
    """
    now = validity.start()
    site_key, staging_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    current = ca.issue(SITE_NAME, site_key, now - _DAY, validity.days)
    previous = ca.issue(SITE_NAME, site_key, now - 120 * _DAY, 90)
    staging = ca.issue(STAGING_NAME, staging_key, now - 10 * _DAY, validity.days)
    files = {
        f"{TLS_DIR}/ca.crt": (ca.pem().encode(), 0o644),
        f"{TLS_DIR}/shop.crt": (_cert_pem(current), 0o644),
        f"{TLS_DIR}/shop.key": (_key_pem(site_key), 0o600),
        f"{TLS_DIR}/shop-previous.crt": (_cert_pem(previous), 0o644),
        f"{TLS_DIR}/staging.crt": (_cert_pem(staging), 0o644),
        f"{TLS_DIR}/staging.key": (_key_pem(staging_key), 0o600),
    }
    return files, current


def _archive(files: dict[str, tuple[bytes, int]]) -> bytes:
    """A tar of ``TLS_DIR`` (mode 755) and ``files``, all root:root, dated now."""
    now = time.time()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.GNU_FORMAT) as tar:
        entries = [
            (TLS_DIR, None, 0o755),
            *((path, content, mode) for path, (content, mode) in files.items()),
        ]
        for path, content, mode in entries:
            info = tarfile.TarInfo(path.lstrip("/"))
            info.mode, info.mtime, info.uname, info.gname = mode, now, "root", "root"
            if content is None:
                info.type = tarfile.DIRTYPE
            else:
                info.size = len(content)
            tar.addfile(info, None if content is None else io.BytesIO(content))
    return out.getvalue()


def _write_command(files: dict[str, tuple[bytes, int]]) -> str:
    """One shell line writing every file (root:root, its mode) and reloading nginx: one
    archive unpacked by the host's own tar (three programs, where a temporary, chown,
    chmod and mv per file took 28 and ~30 CPU-ms of the host's at every boot)."""
    archive = base64.b64encode(_archive(files)).decode()
    return " && ".join(
        [
            f"printf %s {archive} | base64 -d | tar -x -C / -f -",
            # Operators and agents reach the site by its name (curl --cacert /etc/ssl/shop/ca.crt).
            f"{{ grep -q ' {SITE_NAME}$' /etc/hosts || echo '127.0.0.1 {SITE_NAME}' >> /etc/hosts; }}",
            '(read -r pid < /run/nginx.pid && kill -HUP "$pid")',  # a subshell: the session keeps no pid
        ]
    )


def served_certificate(address: tuple[str, int], name: str = SITE_NAME, timeout: float = 3.0) -> bytes | None:
    """The certificate ``address`` presents for ``name`` (DER), unverified; None if no handshake."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection(address, timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=name) as tls,
        ):
            return tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError):
        return None


def install(
    host: Any, services: list[str], shell: Shell, validity: Validity = EPISODE_VALIDITY
) -> SiteTls | None:
    """Give the host's nginx the episode's certificates and wait until 443 serves them.

    ``host`` is the stack's ``LiveHost``; the result is also set as its ``tls``. A host
    without nginx, or without 443 published, gets nothing (None).
    """
    if "nginx" not in services or 443 not in host.handle.ports:
        return None
    address = host.endpoint(443)
    ca = EpisodeCA(host.handle.container_id[:12], validity)
    files, current = site_files(ca, validity)
    result = shell.run(_write_command(files), timeout=30)
    if not result.ok:
        raise StackError(f"cannot install the certificates on {host.name}: {result.output.strip()[-200:]}")
    wanted = current.public_bytes(serialization.Encoding.DER)
    deadline = time.monotonic() + INSTALL_TIMEOUT
    while served_certificate(address) != wanted:  # the reload starts new workers a moment later
        if time.monotonic() > deadline:
            raise StackError(f"nginx on {host.name} does not serve the episode's certificate after a reload")
        time.sleep(0.05)
    site = SiteTls(SITE_NAME, ca.pem(), address, hashlib.sha256(wanted).hexdigest())
    host.tls = site
    return site
