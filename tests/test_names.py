"""Container names stay within one DNS label (the engine's resolver answers for them)."""

from __future__ import annotations

from fixos.stack.names import MAX_NAME, container_name


def test_a_short_name_is_kept_as_it_is() -> None:
    assert container_name("run-easy_1-s1-nop", "web") == "fixos-run-easy_1-s1-nop-web"


def test_a_long_name_is_cut_to_a_label_unique_and_readable() -> None:
    long_id = "20261202-144654-9338-split_1-s1-adversary_repair_open_site"
    names = {container_name(long_id, host) for host in ("web", "app", "db")}
    assert all(len(n) <= MAX_NAME for n in names) and len(names) == 3
    assert all(n.startswith("fixos-20261202-144654-9338-split_1-s1-adv") for n in names)
    other = container_name(long_id.replace("open_site", "open_sitf"), "web")
    assert other != container_name(long_id, "web")  # the digest tells them apart
    assert container_name(long_id, "web") == container_name(long_id, "web")  # stable: claim renames to it
