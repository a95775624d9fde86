"""Mirrors and package indexes come from this machine's apt and pip settings (fake ones here)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fixos.stack import sources
from fixos.stack.sources import apt_sources, debian_mirror, parse_pip_config, pip_build_options, pip_config

DEB822 = """\
Types: deb
# http://snapshot.example/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
"""


def apt_dir(tmp_path: Path, main: str = "", parts: dict[str, str] | None = None) -> Path:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(main)
    for name, text in (parts or {}).items():
        (tmp_path / "sources.list.d" / name).write_text(text)
    return tmp_path


def test_mirror_from_deb822_sources(tmp_path):
    found = apt_dir(tmp_path, parts={"debian.sources": DEB822})
    assert debian_mirror("bookworm", env={}, apt_dir=found) == "http://mirror.example/debian"
    assert debian_mirror("trixie", env={}, apt_dir=found) is None


def test_mirror_from_one_line_sources_list(tmp_path):
    found = apt_dir(
        tmp_path,
        main="# deb http://old.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] https://tls.example/debian/ bookworm main contrib\n",
    )
    assert debian_mirror("bookworm", env={}, apt_dir=found) == "https://tls.example/debian/"


def test_mirror_skips_other_archives_and_disabled_entries(tmp_path):
    found = apt_dir(
        tmp_path,
        parts={
            # apt reads sources.list.d by name: these two come before debian.sources
            "a-cloud.list": "deb https://vendor.example/apt cloud-sdk-bookworm main\n",
            "b-node.sources": "Types: deb\nURIs: https://node.example/node_20.x\nSuites: nodistro\n"
            "Components: main\n",
            "c-off.sources": "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n"
            "Components: main\n",
            "d-cdrom.list": "deb cdrom:[Debian]/ bookworm main\n",
            "debian.sources": DEB822,
            "other.list.disabled": "deb http://ignored.example/debian bookworm main\n",
        },
    )
    assert debian_mirror("bookworm", env={}, apt_dir=found) == "http://mirror.example/debian"
    # cloud, node, cdrom and the two of debian.sources; not the disabled ones
    assert [e.uris[0].split(":")[0] for e in apt_sources(found)] == [
        "https",
        "https",
        "cdrom",
        "http",
        "http",
    ]


def test_mirror_variable_wins(tmp_path):
    found = apt_dir(tmp_path, parts={"debian.sources": DEB822})
    env = {"FIXOS_DEBIAN_MIRROR": "http://local.example/debian"}
    assert debian_mirror("bookworm", env=env, apt_dir=found) == "http://local.example/debian"


def test_no_apt_at_all(tmp_path):
    assert debian_mirror("bookworm", env={}, apt_dir=tmp_path / "missing") is None


PIP_LIST = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.extra-index-url='file:///opt/pypi/simple https://extra.example/simple'
global.find-links='/opt/wheels'
global.index-url='https://global.example/simple'
install.index-url='https://install.example/simple'
"""


def test_pip_config_priority_env_then_install_then_global():
    settings = parse_pip_config(PIP_LIST + ":env:.index-url='http://env.example/simple'\n")
    assert settings["index-url"] == "http://env.example/simple"
    assert parse_pip_config(PIP_LIST)["index-url"] == "https://install.example/simple"
    assert parse_pip_config(PIP_LIST)["find-links"] == "/opt/wheels"


def test_pip_options_keep_what_a_container_reaches():
    config = {
        "index-url": "https://index.example/simple",
        "extra-index-url": "file:///opt/pypi/simple http://127.0.0.1:3141/simple http://localhost/x "
        "https://extra.example/simple",
        "find-links": "/opt/wheels https://links.example/wheels",
        "trusted-host": "extra.example",
    }
    assert pip_build_options(env={}, config=config) == (
        "--index-url https://index.example/simple --extra-index-url https://extra.example/simple "
        "--find-links https://links.example/wheels --trusted-host extra.example"
    )


def test_a_ca_bundle_of_its_own_trusts_the_hosts_pip_reaches(monkeypatch):
    """pip here trusts a CA the container lacks: the hosts it would reach are trusted by name."""
    monkeypatch.setattr(sources, "_default_index_hosts", lambda: ["default.example", "files.example"])
    config = {"cert": "/etc/ssl/certs/ca-certificates.crt", "extra-index-url": "https://extra.example/s"}
    assert pip_build_options(env={}, config=config) == (
        "--extra-index-url https://extra.example/s --trusted-host default.example "
        "--trusted-host files.example --trusted-host extra.example"
    )
    config["index-url"] = "https://index.example:8443/simple"
    assert pip_build_options(env={}, config=config) == (
        "--index-url https://index.example:8443/simple --extra-index-url https://extra.example/s "
        "--trusted-host index.example:8443 --trusted-host extra.example"
    )
    del config["cert"]
    assert "--trusted-host" not in pip_build_options(env={}, config=config)


def test_pip_options_variable_wins_and_the_old_name_still_works():
    config = {"index-url": "https://index.example/simple"}
    assert pip_build_options(env={"FIXOS_PIP_OPTIONS": "--index-url http://x/s"}, config=config) == (
        "--index-url http://x/s"
    )
    assert pip_build_options(env={"FIXOS_PIP_OPTIONS": ""}, config=config) == ""
    assert pip_build_options(env={"FIXOS_EXPORT_PIP_OPTIONS": "--no-index"}, config=config) == "--no-index"


def test_pip_config_reads_real_pip(tmp_path):
    """`pip config list` itself, from one fake file and the PIP_* variables."""
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://file.example/simple\ntrusted-host = file.example\n")
    env = {"PATH": os.environ.get("PATH", ""), "PIP_CONFIG_FILE": str(conf)}
    env["PIP_EXTRA_INDEX_URL"] = "https://extra.example/simple"
    settings = pip_config(env)
    if not settings:
        pytest.skip(f"{sys.executable} -m pip is not available")
    assert settings["index-url"] == "https://file.example/simple"
    assert settings["extra-index-url"] == "https://extra.example/simple"
    assert "--trusted-host file.example" in pip_build_options(env=env)
