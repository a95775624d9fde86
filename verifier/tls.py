"""HTTPS judged from outside: the handshake a browser makes, against the episode's own CA.

The CA certificate comes from the harness (``access.tls``, what the stack made at
up; its key never entered the host), recorded when the healthy host is snapshot:
never from a file of the host, which root there can replace.
"""

from __future__ import annotations

import datetime
import hashlib
import http.client
import socket
import ssl
import time
from typing import Any

from cryptography import x509

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Probe
from .http import SECOND_WAIT

TIMEOUT = 5.0
RELOAD_SECONDS = 1.0
"""how long a final verdict waits before it asks a rejected certificate once more: nginx's
master loads a new certificate after `reload` has returned (a few to a few hundred
milliseconds on a loaded machine); only a final verdict that is failing pays it."""


def _authority(probe: Probe) -> Any:
    """The harness's record of this host's HTTPS (``fixos.stack.tls.SiteTls``), or None."""
    return getattr(probe.access, "tls", None)


def _fetch(
    address: tuple[str, int], name: str, path: str, context: ssl.SSLContext, timeout: float = TIMEOUT
) -> tuple[int, bytes]:
    """GET ``path`` over TLS to ``address`` (the host's 443) with SNI and Host ``name``."""
    with (
        socket.create_connection(address, timeout=timeout) as raw,
        context.wrap_socket(raw, server_hostname=name) as tls,
    ):
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n".encode())
        response = http.client.HTTPResponse(tls)  # type: ignore[arg-type]
        response.begin()
        return response.status, response.read()


def describe_served(address: tuple[str, int], name: str) -> str:
    """What certificate the port presents, unverified: its name(s), issuer and validity."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with (
            socket.create_connection(address, timeout=TIMEOUT) as raw,
            context.wrap_socket(raw, server_hostname=name) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError) as exc:
        return f"no handshake at all ({type(exc).__name__}: {exc})"
    if not der:
        return "no certificate"
    cert = x509.load_der_x509_certificate(der)
    try:
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = alt.get_values_for_type(x509.DNSName)
    except x509.ExtensionNotFound:
        names = []
    now = datetime.datetime.now(datetime.UTC)
    after = cert.not_valid_after_utc
    state = "expired" if after < now else "valid"
    return (
        f"served certificate: subject {cert.subject.rfc4514_string()}, names {names}, "
        f"issuer {cert.issuer.rfc4514_string()}, not after {after:%Y-%m-%d %H:%M} UTC ({state}), "
        f"sha256 {hashlib.sha256(der).hexdigest()[:16]}"
    )


@CHECKS.register
class TlsValid(Check):
    """The site answers over HTTPS with a certificate a browser trusting the episode's CA
    accepts (chain, name, validity period), and the page behind it is the real one."""

    type = "tls_valid"

    class Params(CheckParams):
        name: str = "shop.tidewater.test"
        """the site's name: the SNI sent and the name the certificate must carry."""
        path: str = "/"
        same_as_healthy: bool = True

    def _record(self, probe: Probe) -> str | None:
        site = _authority(probe)
        return None if site is None else site.ca_pem

    def snapshot(self, probe: Probe) -> Any:
        ca = self._record(probe)
        page = None
        if ca is not None:
            try:
                status, body = _fetch(
                    _authority(probe).address, self.params.name, self.params.path, _trusting(ca)
                )
                page = hashlib.sha256(body).hexdigest() if status == 200 else None
            except (OSError, ssl.SSLError, http.client.HTTPException):
                page = None
        return {"ca": ca, "page": page}

    def refine(self, probe: Probe, baseline: Any) -> Any:
        # A pool's cached healthy baseline was recorded on a sibling stack, whose CA was
        # another: this stack's CA comes from the harness again, never from the host.
        return {**(baseline or {}), "ca": self._record(probe)}

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        site, p = _authority(probe), self.params
        ca = (baseline or {}).get("ca")
        if site is None or ca is None:
            return Outcome(False, "no episode CA recorded for this host (is 443 published and nginx on it?)")
        try:
            try:
                status, body = _fetch(site.address, p.name, p.path, _trusting(ca))
            except TimeoutError:
                if not probe.patient:
                    raise
                # as verifier.http.get_page: a slow page (a loaded machine) is asked once more
                status, body = _fetch(site.address, p.name, p.path, _trusting(ca), SECOND_WAIT)
        except ssl.SSLCertVerificationError as exc:
            served = describe_served(site.address, p.name)
            why = f"https://{p.name}: certificate rejected: {exc.verify_message}; {served}"
            rejected = Outcome(False, why)
            if not probe.patient:
                return rejected
            # A final verdict asks once more a moment later: `service nginx reload` returns
            # before nginx's master has loaded the new certificate, and until it has, its old
            # workers still hand out the old one (CI: tls_1's oracle judged within
            # milliseconds of its reload, the served certificate already valid a moment after).
            time.sleep(RELOAD_SECONDS)
            again = self._ask(probe, site, ca, baseline)
            if not again.passed:
                return rejected
            later = f"rejected when first asked, trusted {RELOAD_SECONDS:g} s later"
            return Outcome(True, f"{again.detail} ({later})")
        except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
            return Outcome(False, f"https://{p.name}: no answer ({type(exc).__name__}: {exc})")
        return self._judged(status, body, baseline)

    def _ask(self, probe: Probe, site: Any, ca: str, baseline: Any) -> Outcome:
        """One more fetch, judged as the first (a rejection or no answer fails)."""
        p = self.params
        try:
            status, body = _fetch(site.address, p.name, p.path, _trusting(ca))
        except ssl.SSLCertVerificationError as exc:
            return Outcome(False, f"https://{p.name}: certificate rejected: {exc.verify_message}")
        except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
            return Outcome(False, f"https://{p.name}: no answer ({type(exc).__name__}: {exc})")
        return self._judged(status, body, baseline)

    def _judged(self, status: int, body: bytes, baseline: Any) -> Outcome:
        p = self.params
        seen = f"https://{p.name}{p.path} -> {status}, {len(body)} bytes, certificate trusted"
        if status != 200:
            return Outcome(False, f"{seen}; expected status 200")
        if p.same_as_healthy and hashlib.sha256(body).hexdigest() != baseline.get("page"):
            return Outcome(False, f"{seen}; not the page the healthy site served")
        return Outcome(True, f"{seen}; the site's real page")


def _trusting(ca_pem: str) -> ssl.SSLContext:
    """A client context trusting the episode's CA and nothing else, checking name and dates."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cadata=ca_pem)
    return context
