from __future__ import annotations

import secrets
import tarfile
import time
from pathlib import Path

import docker
import pytest

from fixos.stack import images as images_module
from fixos.stack.hosts import LABEL_RUN
from fixos.stack.images import build_context, content_hash, ensure_base, ensure_image


def make_context(root: Path, file_mode: int, exec_mode: int) -> Path:
    (root / "rootfs" / "opt" / "fixos-test").mkdir(parents=True)
    (root / "Dockerfile").write_text("ARG BASE\nFROM ${BASE}\nCOPY rootfs/ /\n")
    (root / "rootfs" / "opt" / "fixos-test" / "data").write_text("data\n")
    (root / "rootfs" / "opt" / "fixos-test" / "tool").write_text("#!/bin/sh\necho tool\n")
    (root / "Dockerfile").chmod(file_mode)
    (root / "rootfs" / "opt" / "fixos-test" / "data").chmod(file_mode)
    (root / "rootfs" / "opt" / "fixos-test" / "tool").chmod(exec_mode)
    return root


def test_content_hash_follows_inputs(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM x\n")
    (tmp_path / "rootfs").mkdir()
    (tmp_path / "rootfs" / "a").write_text("a")
    first = content_hash(tmp_path, "sha256:base1")
    assert content_hash(tmp_path, "sha256:base1") == first
    assert content_hash(tmp_path, "sha256:base2") != first
    (tmp_path / "rootfs" / "a").write_text("b")
    assert content_hash(tmp_path, "sha256:base1") != first
    (tmp_path / "rootfs" / "a").write_text("a")
    (tmp_path / "rootfs" / "a").chmod(0o755)
    assert content_hash(tmp_path, "sha256:base1") != first


def test_content_hash_ignores_the_umask(tmp_path):
    """A checkout or wheel install under umask 002 gives 664/775: the same image."""
    strict = make_context(tmp_path / "strict", 0o644, 0o755)
    loose = make_context(tmp_path / "loose", 0o664, 0o775)
    assert content_hash(strict, "sha256:b") == content_hash(loose, "sha256:b")


def test_build_context_is_what_the_hash_covers(tmp_path):
    context = make_context(tmp_path, 0o664, 0o775)
    with tarfile.open(fileobj=build_context(context)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        tool = tar.extractfile("rootfs/opt/fixos-test/tool")
        assert tool is not None and tool.read() == b"#!/bin/sh\necho tool\n"
    assert {name: oct(m.mode) for name, m in members.items() if m.isfile()} == {
        "Dockerfile": "0o644",
        "rootfs/opt/fixos-test/data": "0o644",
        "rootfs/opt/fixos-test/tool": "0o755",
    }
    assert {name for name, m in members.items() if m.isdir()} == {
        "rootfs",
        "rootfs/opt",
        "rootfs/opt/fixos-test",
    }
    assert all(m.mode == 0o755 for m in members.values() if m.isdir())


@pytest.mark.live
def test_built_image_has_the_hashed_modes(tmp_path, monkeypatch, client: docker.DockerClient):
    """Built under a loose umask, the image still holds 644/755 files: its tag is its content."""
    name = f"test-context-{secrets.token_hex(3)}"
    make_context(tmp_path / name, 0o664, 0o775)
    monkeypatch.setattr(images_module, "IMAGES_DIR", tmp_path)
    ensure_base(client, lambda line: None)
    tag = ensure_image(client, name, lambda line: None)
    try:
        out = client.containers.run(
            tag,
            ["stat", "-c", "%a %n", "/opt/fixos-test", "/opt/fixos-test/data", "/opt/fixos-test/tool"],
            remove=True,
        )
        assert out.decode().split("\n")[:3] == [
            "755 /opt/fixos-test",
            "644 /opt/fixos-test/data",
            "755 /opt/fixos-test/tool",
        ]
        assert ensure_image(client, name, lambda line: pytest.fail(f"rebuilt: {line}")) == tag
    finally:
        client.images.remove(tag, force=True)
        client.images.remove(f"fixos/{name}:latest", force=True)


@pytest.mark.live
def test_the_base_image_root_lets_daemon_users_reach_their_files(client: docker.DockerClient):
    """An imported rootfs takes the mode of the directory it was tarred from: a 700
    "/" (mkdtemp's) broke every non-root daemon on btrfs, where overlay2 hid it."""
    base = ensure_base(client, lambda line: None)
    out = client.containers.run(base, ["stat", "-c", "%a", "/"], remove=True)
    assert out.decode().strip() == "755", base


GRANTS = (
    "SET time_zone = '+00:00'; SELECT Host, User, JSON_VALUE(Priv, '$.password_last_changed') "
    "FROM mysql.global_priv; SELECT Host, User, Timestamp FROM mysql.proxies_priv"
)


@pytest.mark.live
def test_the_server_image_holds_nothing_its_build_made_up(client: docker.DockerClient, images):
    """Harbor builds an exported task's image itself: what a build writes of its own
    moment or machine (grant rows' times, SSH host keys) would make that build's healthy
    host differ from FixOS's, and the tables gate fail the reference repair."""
    script = (
        "ls /etc/ssh; mkdir -p /run/mysqld && chown mysql /run/mysqld; "
        "mariadbd --user=mysql --skip-networking --socket=/run/mysqld/mysqld.sock >/dev/null 2>&1 & "
        "for _ in $(seq 50); do mariadb-admin ping >/dev/null 2>&1 && break; sleep 0.2; done; "
        f'mariadb -N -e "{GRANTS}"'
    )
    out = client.containers.run(images["server"], ["sh", "-c", script], remove=True).decode()
    assert "ssh_host_" not in out, out
    rows = [line.split("\t") for line in out.splitlines() if "\t" in line]
    assert {r[1] for r in rows} >= {"root", "mysql", "shop"} and all(r[0] in ("localhost", "%") for r in rows)
    times = {r[2] for r in rows} - {"0", "NULL"}
    assert times <= {"1767225600", "2026-01-01 00:00:00"} and times, rows


@pytest.mark.live
def test_each_host_makes_its_own_ssh_host_keys_at_boot(client: docker.DockerClient, images, test_run_id):
    labels = {LABEL_RUN: test_run_id}  # removed by the fixture
    hosts = [client.containers.run(images["server"], detach=True, labels=labels) for _ in range(2)]
    ready = "test -s /etc/ssh/ssh_host_ed25519_key && pidof sshd >/dev/null"
    keys = []
    for host in hosts:
        for _ in range(100):
            if host.exec_run(["sh", "-c", ready]).exit_code == 0:
                break
            time.sleep(0.2)
        found = host.exec_run(["sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub"]).output.decode()
        assert found.count("ssh-ed25519 ") == 1 and found.count("ecdsa-sha2-nistp256 ") == 1, found
        assert host.exec_run(["sh", "-c", ready]).exit_code == 0  # sshd runs with them
        keys.append(found)
    assert keys[0] != keys[1]
