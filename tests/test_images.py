from __future__ import annotations

from fixos.stack.images import content_hash


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
