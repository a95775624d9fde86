"""Secrets left out of what is made to be shared (a run page, an episode record's diff of
the hosts' files): private keys and password hashes an agent printed (``cat /etc/shadow``,
``SELECT ... FROM mysql.user``, a TLS key) or wrote.

Each is replaced by a marker that says what stood there, so a reader still sees that the
agent read the shadow file or changed a hash, not the hash itself. A hash can be cracked
offline and a private key used at once; a page travels further than the run directory.

``redact`` works on any text; ``redact_file`` also knows a file by its path: the shadow
files' hash fields (whatever the scheme), ``password`` lines of MariaDB's ``.cnf`` files,
and the files that hold nothing but key material (``secret_file``), whose contents are
never shown at all.
"""

from __future__ import annotations

import fnmatch
import re

__all__ = ["redact", "redact_file", "secret_file"]

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
_AUTH_STRING = re.compile(r"""("authentication_string"\s*:\s*")[^"]*(")""")
"""MariaDB's ``mysql.global_priv`` as JSON (a dump of it): ed25519 and other plugins' hashes."""
_CNF_PASSWORD = re.compile(r"^(\s*password\s*=).*$", re.MULTILINE | re.IGNORECASE)

SHADOWS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-")
"""files whose second field is a password hash, whatever its scheme (old DES ones too)."""
SECRET_FILES = ("/etc/ssl/private/*", "/etc/ssh/ssh_host_*_key", "*.key", "/root/.ssh/id_*")
"""files that hold key material and nothing a reader needs (a ``.pub`` beside one is public):
their contents are never shown."""
_HIDDEN = "[password hash redacted]"


def redact(text: str) -> str:
    """``text`` with every private key and password hash replaced by a marker."""
    if "PRIVATE KEY" in text:
        text = _PRIVATE_KEY.sub(lambda m: f"[private key redacted: {m[1]}PRIVATE KEY]", text)
    if "*" in text:
        text = _MYSQL_HASH.sub(f"*{_HIDDEN}", text)
    if "$" in text:
        text = _CRYPT_HASH.sub(lambda m: f"${m[1]}${_HIDDEN}", text)
    if "authentication_string" in text:
        text = _AUTH_STRING.sub(rf"\g<1>{_HIDDEN}\g<2>", text)
    return text


def secret_file(path: str) -> bool:
    """Whether the file at ``path`` (as the host names it) holds key material only."""
    return not path.endswith(".pub") and any(fnmatch.fnmatchcase(path, p) for p in SECRET_FILES)


def _shadow_line(line: str) -> str:
    fields = line.split(":")
    if len(fields) < 2:
        return line
    hashed = fields[1]
    kept = hashed[: len(hashed) - len(hashed.lstrip("!"))]  # a lock's "!" says something: kept
    if hashed[len(kept) :] not in ("", "*", "x"):
        fields[1] = kept + _HIDDEN
    return ":".join(fields)


def redact_file(path: str, text: str) -> str:
    """A file's text with its secrets replaced by markers: ``redact``'s, and what ``path``
    tells (the shadow files' hashes, a ``.cnf`` file's ``password`` lines)."""
    if path in SHADOWS:
        text = "\n".join(_shadow_line(line) for line in text.split("\n"))
    elif path.endswith(".cnf") and "password" in text.lower():
        text = _CNF_PASSWORD.sub(r"\g<1> [password redacted]", text)
    return redact(text)
