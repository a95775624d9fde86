"""Where image builds fetch packages from: the places this machine already uses.

The Debian mirror for debootstrap is the one apt is configured with, and the index
options for pip inside ``docker build`` are the ones pip is configured with, so no host
name is written into FixOS. Each can be overridden by an environment variable
(``FIXOS_DEBIAN_MIRROR``, ``FIXOS_PIP_OPTIONS``).
"""

from __future__ import annotations

import ast
import ipaddress
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

__all__ = [
    "APT_DIR",
    "DEBIAN_MIRROR_ENV",
    "PIP_OPTIONS_ENV",
    "AptSource",
    "apt_sources",
    "debian_mirror",
    "parse_pip_config",
    "pip_build_options",
    "pip_config",
]

APT_DIR = Path("/etc/apt")
DEBIAN_MIRROR_ENV = "FIXOS_DEBIAN_MIRROR"
PIP_OPTIONS_ENV = ("FIXOS_PIP_OPTIONS", "FIXOS_EXPORT_PIP_OPTIONS")
"""The first set wins; the second is the name the export tests used before."""

_ONE_LINE = re.compile(r"^(deb|deb-src)\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s*(.*)$")


@dataclass(frozen=True)
class AptSource:
    """One entry of apt's sources, from either file format."""

    types: tuple[str, ...]
    uris: tuple[str, ...]
    suites: tuple[str, ...]
    components: tuple[str, ...]


def _one_line_entries(text: str) -> Iterator[AptSource]:
    for raw in text.splitlines():
        match = _ONE_LINE.match(raw.split("#", 1)[0].strip())
        if match:
            kind, uri, suite, components = match.groups()
            yield AptSource((kind,), (uri,), (suite,), tuple(components.split()))


def _deb822_entries(text: str) -> Iterator[AptSource]:
    for stanza in re.split(r"\n[ \t]*\n", text):
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            if line[0] in " \t" and key:  # a continuation line
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
        if not fields or fields.get("enabled", "yes").lower() == "no":
            continue
        yield AptSource(
            *(tuple(fields.get(k, "").split()) for k in ("types", "uris", "suites", "components"))
        )


def apt_sources(apt_dir: Path = APT_DIR) -> list[AptSource]:
    """Every entry apt reads, in apt's order: sources.list, then sources.list.d by name."""
    entries: list[AptSource] = []
    main = apt_dir / "sources.list"
    if main.is_file():
        entries += _one_line_entries(main.read_text(encoding="utf-8", errors="replace"))
    parts = apt_dir / "sources.list.d"
    for path in sorted(parts.iterdir()) if parts.is_dir() else []:
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
        if path.suffix == ".list":
            entries += _one_line_entries(text)
        elif path.suffix == ".sources":
            entries += _deb822_entries(text)
    return entries


def debian_mirror(release: str, env: Mapping[str, str] | None = None, apt_dir: Path = APT_DIR) -> str | None:
    """The mirror to debootstrap ``release`` from: FIXOS_DEBIAN_MIRROR, else the first http(s)
    URI apt uses for that release's main archive; None leaves the choice to debootstrap."""
    env = os.environ if env is None else env
    if env.get(DEBIAN_MIRROR_ENV):
        return env[DEBIAN_MIRROR_ENV]
    for entry in apt_sources(apt_dir):
        # The suite must be the release itself: "<release>-security" and third-party
        # archives (their own suite names) cannot bootstrap a Debian root.
        if "deb" in entry.types and release in entry.suites and "main" in entry.components:
            for uri in entry.uris:
                if urlsplit(uri).scheme in ("http", "https"):
                    return uri
    return None


# -- pip ----------------------------------------------------------------------

_PRIORITY = {"global": 0, "install": 1, ":env:": 2}
"""pip's own order for `pip install`: [global], then [install], then PIP_* variables."""


def parse_pip_config(text: str) -> dict[str, str]:
    """The settings `pip install` would use, from the output of `pip config list`."""
    found: dict[str, tuple[int, str]] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        section, _, key = name.rpartition(".")
        if not sep or section not in _PRIORITY:
            continue
        try:
            parsed = ast.literal_eval(value)  # pip prints each value with repr()
        except (ValueError, SyntaxError):
            parsed = value
        rank = _PRIORITY[section]
        if key not in found or found[key][0] <= rank:
            found[key] = (rank, str(parsed))
    return {key: value for key, (_, value) in found.items()}


def pip_config(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """This machine's pip settings (files and PIP_* variables), as `pip config list` reports them."""
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            env=None if env is None else dict(env),
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_pip_config(listed.stdout) if listed.returncode == 0 else {}


def _reachable_from_container(url: str) -> bool:
    """A local path, a file:// URL or this machine's loopback mean nothing inside a container."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return False
    try:
        return not ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return True


def _default_index_hosts() -> list[str]:
    """Where pip goes when no index is set: its own default index and file host."""
    try:
        from pip._internal.models.index import PyPI
    except ImportError:
        return []
    return [urlsplit(PyPI.simple_url).netloc, PyPI.file_storage_domain]


def pip_build_options(env: Mapping[str, str] | None = None, config: Mapping[str, str] | None = None) -> str:
    """Options for pip inside `docker build` (the PIP_OPTIONS build argument).

    FIXOS_PIP_OPTIONS, when set, is used as is. Otherwise this machine's pip settings
    (``config``, read with `pip config list` when not given): index-url,
    extra-index-url, find-links and trusted-host, leaving out what a container cannot
    reach. When pip here trusts a CA bundle of its own (``cert``, e.g. a proxy that
    re-signs TLS), the container does not have that bundle, so the hosts pip reaches
    there are trusted by name instead.
    """
    env = os.environ if env is None else env
    for name in PIP_OPTIONS_ENV:
        if name in env:
            return env[name]
    settings = pip_config(env) if config is None else config
    options: list[str] = []
    hosts: list[str] = []
    index = settings.get("index-url", "")
    if _reachable_from_container(index):
        options += ["--index-url", index]
        hosts.append(urlsplit(index).netloc)
    else:
        hosts += _default_index_hosts()
    for flag, key in (("--extra-index-url", "extra-index-url"), ("--find-links", "find-links")):
        for url in settings.get(key, "").split():
            if _reachable_from_container(url):
                options += [flag, url]
                hosts.append(urlsplit(url).netloc)
    trusted = settings.get("trusted-host", "").split()
    if settings.get("cert"):
        trusted += hosts
    for host in dict.fromkeys(trusted):
        options += ["--trusted-host", host]
    return " ".join(options)
