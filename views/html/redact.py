"""Secrets left out of a page that is made to be shared: private keys and password hashes an
agent printed (``cat /etc/shadow``, ``SELECT ... FROM mysql.user``, a TLS key) or wrote.

Each is replaced by a marker that says what stood there, so a reader still sees that the
agent read the shadow file or changed a hash, not the hash itself. A hash can be cracked
offline and a private key used at once; a page travels further than the run directory.
"""

from __future__ import annotations

import re

__all__ = ["redact"]

_PRIVATE_KEY = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY-----"
    # up to its END line, or (an output cut short) as far as the key's own characters go
    r"(?:.*?-----END \1PRIVATE KEY-----|[A-Za-z0-9+/=:,\-\s]*)",
    re.DOTALL,
)
_MYSQL_HASH = re.compile(r"\*[0-9A-Fa-f]{40}(?![0-9A-Fa-f])")
"""mysql_native_password: ``*`` and 40 hex digits (SHA1 of SHA1 of the password)."""
_CRYPT_HASH = re.compile(r"\$(1|2[abxy]|5|6|7|y|gy|sha1|md5|apr1)\$[./A-Za-z0-9$=,]{8,}")
"""crypt(3) hashes as in /etc/shadow and .htpasswd: ``$id$[params$]salt$hash``; eight characters
at least, so a shell's ``$1$x`` is left alone."""


def redact(text: str) -> str:
    """``text`` with every private key and password hash replaced by a marker."""
    if "PRIVATE KEY" in text:
        text = _PRIVATE_KEY.sub(lambda m: f"[private key redacted: {m[1]}PRIVATE KEY]", text)
    if "*" in text:
        text = _MYSQL_HASH.sub("*[password hash redacted]", text)
    if "$" in text:
        text = _CRYPT_HASH.sub(lambda m: f"${m[1]}$[password hash redacted]", text)
    return text
