"""HTTPS broken the way certificate housekeeping breaks it.

What a host's /etc/ssl/shop holds at stack up (``fixos.stack.tls``): the site's
pair (shop.crt, shop.key), the previous certificate (expired, same key), the
staging site's pair, and the CA's certificate. The CA's key is never on the host,
so these faults only move what is there: an operator can always find the healthy
files again (in the config's history or a backup directory).

Each fault's ``inject`` returns the same keys, so a scenario's solution reads one
shape: ``variant`` (``config``: nginx's site now names other files; ``file``: the
live files were replaced, the healthy ones kept in ``backup_dir``), and for the
config variant ``file``, ``original`` and ``broken`` (the lines as they were and are).
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Mapping
from typing import Any

from ..core.models import Outcome
from ..core.words import word
from ..shells.base import Shell
from .base import FAULTS, Fault, PidWord, plain_pid
from .config import NGINX_SITE
from .edit import replace_command, replace_in_file
from .service import stop_service

SITE_NAME = "shop.tidewater.test"
STAGING_NAME = "staging.tidewater.test"
TLS_DIR = "/etc/ssl/shop"
PAIR_LINES = f"ssl_certificate {TLS_DIR}/shop.crt;\n    ssl_certificate_key {TLS_DIR}/shop.key;"
BACKUP_DIRS = [f"{TLS_DIR}/backup", "/root/ssl-backup", f"{TLS_DIR}/old-live"]

# The certificate 443 presents for the site's name, as an operator would look at it.
SERVED = (
    f"echo | timeout 5 openssl s_client -connect 127.0.0.1:443 -servername {SITE_NAME} 2>/dev/null "
    "| openssl x509 -noout -subject -enddate -checkend 0 2>&1"
)

# The certificate and key the site's config names, and whether their public halves differ.
_NAMED = "sed -n 's/^ *{} \\+\\([^ ;]*\\);.*/\\1/p' " + NGINX_SITE + " | head -n 1"
PAIR_MISMATCH = (
    f"crt=$({_NAMED.format('ssl_certificate')}); key=$({_NAMED.format('ssl_certificate_key')}); "
    '[ "$(openssl x509 -noout -pubkey -in "$crt")" != "$(openssl pkey -pubout -in "$key" 2>/dev/null)" ] '
    '&& echo "$key does not match $crt"'
)


def _pair(cert: str, key: str) -> str:
    return f"ssl_certificate {TLS_DIR}/{cert};\n    ssl_certificate_key {TLS_DIR}/{key};"


def _seeded(variant: str, *, original: str = "", broken: str = "", backup_dir: str = "") -> dict[str, Any]:
    return {
        "variant": variant,
        "file": NGINX_SITE,
        "original": original,
        "broken": broken,
        "backup_dir": backup_dir,
    }


class _Swaps:
    """Shared by the faults below (a mixin, not a Fault: every Fault class is a registered
    type): the seeded config edit or file swap, and undoing it."""

    records = ("variant", "file", "original", "broken", "backup_dir")
    KEPT: tuple[str, ...] = ()
    """the files of TLS_DIR that the swap variant keeps in its backup directory."""

    def __init__(self, params: Any) -> None:
        super().__init__(params)
        self.seeded: dict[str, Any] = {}
        """what inject drew and did"""

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The config's line put back, or the kept files copied back; nginx is the
        solution's to reload or start."""
        if seeded["variant"] == "config":
            return replace_command(seeded["file"], seeded["broken"], seeded["original"])
        kept = " ".join(f"{word(seeded['backup_dir'])}/{name}" for name in self.KEPT)
        return f"cp -p {kept} {TLS_DIR}/"

    def _edit(self, shell: Shell, original: str, broken: str) -> dict[str, Any]:
        replace_in_file(shell, NGINX_SITE, original, broken)
        return _seeded("config", original=original, broken=broken)

    def _swap(self, shell: Shell, rng: random.Random, replace: str, names: list[str]) -> dict[str, Any]:
        """Keep ``names`` (files of TLS_DIR) in a backup directory, then run ``replace``."""
        backup = rng.choice(BACKUP_DIRS)
        kept = " ".join(f"{TLS_DIR}/{n}" for n in names)
        result = shell.run(f"mkdir -p -m 700 {backup} && cp -p {kept} {backup}/ && {replace}", timeout=20)
        if result.exit_code != 0:
            raise RuntimeError(f"cannot swap the certificates: {result.output.strip()[-200:]}")
        return _seeded("file", backup_dir=backup)

    def _restore(self, shell: Shell) -> None:
        s = self.seeded
        if s.get("variant") == "config":
            shell.run(replace_command(NGINX_SITE, s["broken"], s["original"]), timeout=10)
        elif s.get("variant") == "file":
            backup = shlex.quote(s["backup_dir"])
            shell.run(f"cp -p {backup}/* {TLS_DIR}/ && rm -rf {backup}", timeout=10)


def _served(shell: Shell) -> str:
    return shell.run(SERVED, timeout=15).output.strip().replace("\n", "; ")


class _ServesAnother(_Swaps):
    """Shared by the faults whose nginx keeps running and serves another certificate: the
    seed draws the config variant or the file variant, nginx reloads, the proof is what
    443 serves (the fault's ``symptom``), and a revert reloads nginx again."""

    EDIT: tuple[str, str] = ("", "")
    """the config variant: the site's lines as they are, and as the fault leaves them."""
    SWAP = ""
    """the file variant: the command that copies other files over the site's (KEPT first kept)."""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        if rng.random() < 0.5:
            self.seeded = self._edit(shell, *self.EDIT)
        else:
            self.seeded = self._swap(shell, rng, self.SWAP, list(self.KEPT))
        shell.run("service nginx reload", timeout=30)
        return self.seeded

    def confirm(self, shell: Shell) -> Outcome:
        shown = shell.run(self.symptom(self.seeded) or "false", timeout=15)
        served = _served(shell)
        return Outcome(shown.exit_code == 0, f"443 serves: {served}")

    def revert(self, shell: Shell) -> None:
        self._restore(shell)
        shell.run("service nginx reload", timeout=30)


def _served_test(expect: str) -> str:
    """A shell test: 443 serves a certificate whose ``SERVED`` output matches the glob ``expect``."""
    return f'out=$({SERVED}); case "$out" in {expect}) true ;; *) false ;; esac'


@FAULTS.register
class TlsExpired(_ServesAnother, Fault):
    """nginx serves the site's previous certificate, expired: the config names it, or it
    was copied over the current one (the current one kept in a backup directory)."""

    type = "tls_expired"
    KEPT = ("shop.crt",)
    EDIT = (f"ssl_certificate {TLS_DIR}/shop.crt;", f"ssl_certificate {TLS_DIR}/shop-previous.crt;")
    SWAP = f"cp {TLS_DIR}/shop-previous.crt {TLS_DIR}/shop.crt"

    def symptom(self, seeded: dict[str, Any], pid: PidWord = plain_pid) -> str | None:
        return _served_test(f'*"CN = {SITE_NAME}"*"will expire"*')


@FAULTS.register
class TlsWrongName(_ServesAnother, Fault):
    """nginx serves the staging site's certificate (and key) for the shop: the config names
    the staging pair, or the staging pair was copied over the shop's (kept in a backup)."""

    type = "tls_wrong_name"
    KEPT = ("shop.crt", "shop.key")
    EDIT = (PAIR_LINES, _pair("staging.crt", "staging.key"))
    SWAP = f"cp {TLS_DIR}/staging.crt {TLS_DIR}/shop.crt && cp {TLS_DIR}/staging.key {TLS_DIR}/shop.key"

    def symptom(self, seeded: dict[str, Any], pid: PidWord = plain_pid) -> str | None:
        return _served_test(f'*"CN = {STAGING_NAME}"*')


@FAULTS.register
class TlsKeyMismatch(_Swaps, Fault):
    """The site's key no longer matches its certificate, and nginx was restarted: bookworm's
    nginx refuses the pair (``SSL_CTX_use_PrivateKey ... key values mismatch``) and stays
    down. Either the config names the staging key, or a renewal generated a new key over
    shop.key (with a CSR beside it) that no CA ever signed, the old key kept in a backup."""

    type = "tls_key_mismatch"
    KEPT = ("shop.key",)

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        # Debian's restart refuses a config that fails its test and keeps the old nginx:
        # a stop, the change, then a start is how the site goes down.
        stop_service(shell, "nginx")
        if rng.random() < 0.5:
            old = f"ssl_certificate_key {TLS_DIR}/shop.key;"
            self.seeded = self._edit(shell, old, f"ssl_certificate_key {TLS_DIR}/staging.key;")
        else:
            renew = (
                "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 2>/dev/null"
                f" > {TLS_DIR}/shop.key"
                f" && openssl req -new -key {TLS_DIR}/shop.key -subj /CN={SITE_NAME} -out {TLS_DIR}/shop.csr"
            )
            self.seeded = self._swap(shell, rng, renew, list(self.KEPT))
        shell.run("service nginx start", timeout=30)
        return self.seeded

    def confirm(self, shell: Shell) -> Outcome:
        # The pair itself, not only nginx's verdict: beside another nginx fault (a
        # broken line), `nginx -t` stops at that one before it loads any key.
        status = shell.run("service nginx status", timeout=10)
        if status.exit_code == 0:
            return Outcome(False, "nginx still running")
        pair = shell.run(PAIR_MISMATCH, timeout=15)
        if pair.exit_code != 0:
            return Outcome(False, f"nginx down, but the pair it names matches: {pair.output[-200:]}")
        test = shell.run("nginx -t 2>&1", timeout=20).output
        emerg = next((line for line in test.splitlines() if "emerg" in line), test.strip())
        return Outcome(True, f"nginx down; {pair.output.strip()[-160:]}; `nginx -t`: {emerg[:200]}")

    def revert(self, shell: Shell) -> None:
        self._restore(shell)
        shell.run(f"rm -f {TLS_DIR}/shop.csr; service nginx start", timeout=30)
