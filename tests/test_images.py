from __future__ import annotations

import secrets
import tarfile
from pathlib import Path

import docker
import pytest

from fixos.stack import images as images_module
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
