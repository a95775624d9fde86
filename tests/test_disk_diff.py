"""What the agent changed on disk (``fixos.stack.disk_diff``): built from fake overlay
directories (an image layer and an upper one in tmp_path) as the host boots, takes its
faults and is left by the agent, with every secret redacted before it is kept; then once
live, an easy_1 episode whose record and page show the file the agent wrote."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from fixos.records.models import EpisodeRecord, HostDisk
from fixos.records.redact import redact_file, secret_file
from fixos.stack import disk_diff
from fixos.stack.disk_diff import REMOTE, DiskTrail, host_disk, read_upper
from fixos.stack.host_files import LocalView
from fixos.stack.overlay import Layers

SALT_A, SALT_B = "$6$saltsalt$" + "A" * 86, "$6$pepperpe$" + "B" * 86
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1\nZZZZsecretkeybody\n-----END RSA PRIVATE KEY-----\n"
MYSQL_HASH = "*" + "0123456789ABCDEF" * 2 + "01234567"


def put(root: Path, path: str, text: str | bytes, mode: int = 0o644) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".new")  # a new inode, as `sed -i` and editors leave
    tmp.write_bytes(text.encode() if isinstance(text, str) else text)
    tmp.chmod(mode)
    os.replace(tmp, target)


def whiteout(root: Path, path: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(target, stat.S_IFCHR | 0o000, os.makedev(0, 0))  # overlay's mark of a deletion


@pytest.fixture
def layers(tmp_path: Path) -> Layers:
    image, upper = tmp_path / "image", tmp_path / "upper"
    put(image, "/etc/nginx/nginx.conf", "user www-data;\nworker_processes 2;\nevents {}\n")
    put(image, "/etc/shadow", f"root:{SALT_A}:19000:0:::\nwww-data:*:19000:0:::\n", 0o640)
    put(image, "/etc/mysql/my.cnf", "[client]\nuser = root\npassword = hunter2\n")
    put(image, "/etc/motd", "hello\n")
    put(image, "/etc/old.conf", "keep me\n")
    put(image, "/usr/bin/tool", b"\x7fELF\x00\x01")
    upper.mkdir()
    return Layers(str(upper), (str(image),))


def test_each_change_is_marked_by_who_made_it_and_diffed_redacted(layers: Layers) -> None:
    upper = Path(layers.upper)
    put(upper, "/etc/ssh/ssh_host_ed25519_key", PEM, 0o600)  # the host's own boot
    healthy = read_upper(layers)
    put(upper, "/etc/nginx/nginx.conf", "user www-data;\nworker_processes 0;\nevents {}\n")  # the faults
    put(upper, "/etc/nginx/conf.d/evil.conf", "deny all;\n")
    put(upper, "/run/nginx.pid", "42\n")
    confirmed = read_upper(layers, hold=True)
    # the agent
    put(upper, "/etc/nginx/nginx.conf", "user www-data;\nworker_processes 4;\nevents {}\n")
    (upper / "etc/nginx/conf.d/evil.conf").unlink()
    put(upper, "/etc/shadow", f"root:{SALT_B}:19001:0:::\nwww-data:*:19000:0:::\n", 0o640)
    put(upper, "/etc/mysql/my.cnf", "[client]\nuser = root\npassword = swordfish\n")
    put(upper, "/etc/motd", "hello\n", 0o600)
    whiteout(upper, "/etc/old.conf")
    put(upper, "/usr/bin/tool", b"\x7fELF\x00\x02\x03")
    os.symlink("/etc/passwd", upper / "etc/link")  # named, never followed to this machine's file
    put(upper, "/root/dump.sql", f"-- users\n{PEM}GRANT USAGE IDENTIFIED BY PASSWORD '{MYSQL_HASH}';\n")
    put(upper, "/var/log/nginx/access.log", "GET /\n")  # the host writes its logs on its own

    disk = host_disk("web", layers, healthy, confirmed)
    files = {f.path: f for f in disk.files}
    assert (
        disk.marked
        and disk.note == ""
        and "/run/nginx.pid" not in files
        and "/var/log/nginx/access.log" not in files
    )
    assert "/etc" not in files and "/etc/nginx" not in files  # only a child changed there

    conf = files["/etc/nginx/nginx.conf"]
    assert (conf.kind, conf.agent, conf.faults) == ("changed", True, True)
    assert "-worker_processes 2;" in conf.diff and "+worker_processes 4;" in conf.diff
    assert "-worker_processes 0;" in conf.agent_diff and "+worker_processes 4;" in conf.agent_diff
    evil = files["/etc/nginx/conf.d/evil.conf"]
    assert (evil.kind, evil.agent, evil.faults) == (
        "as image",
        True,
        True,
    ) and "-deny all;" in evil.agent_diff
    key = files["/etc/ssh/ssh_host_ed25519_key"]
    assert (key.agent, key.faults, key.diff) == (False, False, "") and key.what.startswith("key material")

    shadow = files["/etc/shadow"]
    assert (
        "-root:[password hash redacted]:19000" in shadow.diff
        and "+root:[password hash redacted]:19001" in shadow.diff
    )
    assert files["/etc/mysql/my.cnf"].what.endswith("changed only where secrets are redacted")
    assert "mode 0644 -> 0600" in files["/etc/motd"].what and files["/etc/motd"].diff == ""
    assert (files["/etc/old.conf"].kind, files["/etc/old.conf"].diff.splitlines()[-1]) == (
        "deleted",
        "-keep me",
    )
    assert (
        files["/usr/bin/tool"].what == "binary, 6 bytes -> binary, 7 bytes"
        and files["/usr/bin/tool"].diff == ""
    )
    assert files["/etc/link"].what == "link -> /etc/passwd" and "root:x:" not in files["/etc/link"].diff
    dump = files["/root/dump.sql"].diff
    assert "+[private key redacted: RSA PRIVATE KEY]" in dump and "*[password hash redacted]" in dump
    marks = [f.agent for f in disk.files]
    assert marks == sorted(marks, reverse=True)  # the agent's first

    kept = json.dumps([f.model_dump() for f in disk.files])
    for secret in (SALT_A, SALT_B, "hunter2", "swordfish", "ZZZZsecretkeybody", MYSQL_HASH):
        assert secret not in kept


def test_secrets_are_redacted_by_path_and_by_content() -> None:
    shadow = redact_file(
        "/etc/shadow", "root:abcdefghijklm:1::\nbob:!$y$j9T$abcdefgh$xyz:1::\nbin:*:1::\nx:!:1::"
    )
    assert shadow.splitlines() == [
        "root:[password hash redacted]:1::",  # an old DES hash: no $id$ to know it by
        "bob:![password hash redacted]:1::",  # locked: the "!" is kept
        "bin:*:1::",
        "x:!:1::",
    ]
    assert redact_file("/root/.my.cnf", "[client]\nPassword=hunter2\nuser=root") == (
        "[client]\nPassword= [password redacted]\nuser=root"
    )
    assert redact_file("/root/notes.txt", "password = kept: not a .cnf") == "password = kept: not a .cnf"
    dumped = redact_file("/root/priv.json", '{"authentication_string":"AbCdEf123=","plugin":"ed25519"}')
    assert "AbCdEf123" not in dumped and '"plugin":"ed25519"' in dumped
    secret = [
        "/etc/ssl/private/shop.pem",
        "/etc/ssh/ssh_host_rsa_key",
        "/etc/ssl/shop/shop.key",
        "/root/.ssh/id_ed25519",
    ]
    assert all(secret_file(p) for p in secret)
    assert not any(
        secret_file(p) for p in ("/etc/ssh/ssh_host_rsa_key.pub", "/root/.ssh/id_ed25519.pub", "/etc/hosts")
    )


def test_a_long_diff_is_cut_and_a_host_that_cannot_be_read_says_why(layers: Layers, monkeypatch) -> None:
    put(Path(layers.upper), "/etc/big.conf", "".join(f"line {i}\n" for i in range(500)))
    unmarked = host_disk("web", layers, None, None)
    (change,) = unmarked.files
    assert not unmarked.marked and unmarked.note.endswith("who changed what is not told")
    assert change.diff.splitlines()[-1].endswith("more line(s) of diff not kept]")
    assert len(change.diff) <= disk_diff.DIFF_CHARS + 100

    class Remote:
        def view(self) -> LocalView:
            return LocalView()

    class Broken:
        def view(self) -> LocalView:
            raise OSError("gone")

    trail = DiskTrail()
    trail.healthy({"web": Remote(), "db": Broken()})  # never raises
    remote, broken = trail.left({"web": Remote(), "db": Broken()})
    assert (remote.host, remote.note, remote.files) == ("web", REMOTE, [])
    assert broken.note == "not read: OSError: gone"


def test_records_without_a_disk_still_load_and_with_one_round_trip() -> None:
    line = {
        "schema_version": 1, "run_id": "r", "episode_id": "e", "scenario": "easy_1", "difficulty": "easy",
        "seed": 1, "agent": "oracle", "status": "scored", "reward": 1.0, "solved": True, "steps": 1,
        "timings": {},
    }  # fmt: skip
    old = EpisodeRecord.model_validate_json(json.dumps(line), context={"reading": True})
    assert old.disk is None
    new = old.model_copy(update={"disk": [HostDisk(host="web", note=REMOTE)]})
    again = EpisodeRecord.model_validate_json(new.model_dump_json(), context={"reading": True})
    assert again.disk == [HostDisk(host="web", note=REMOTE)]


@pytest.mark.live
def test_an_easy_1_episode_records_and_shows_what_the_oracle_wrote(
    client, images, test_run_id, tmp_path
) -> None:
    from fixos.episodes.episode import run_episode
    from fixos.records.rundir import RunDir
    from fixos.scenarios.catalog import load_catalog
    from fixos.views.html import PageWriter

    easy_1 = load_catalog()["easy_1"]
    # easy_1's own fix (`service nginx start`) writes only under /run, which is the host's own:
    # the oracle also leaves a note, as an on-call engineer would
    note = "printf 'nginx restarted by the on-call\\n' > /root/oncall.txt\n"
    scenario = easy_1.model_copy(update={"solution": easy_1.solution + note})
    record, steps = run_episode(scenario, 1, "oracle", client=client, images=images, run_id=test_run_id)
    assert record.status == "scored" and record.reward == 1.0, record.error
    (web,) = record.disk or []
    files = {f.path: f for f in web.files}
    assert web.note == "" and [p for p, f in files.items() if f.agent] == ["/root/oncall.txt"]
    assert "+nginx restarted by the on-call" in files["/root/oncall.txt"].diff
    assert not any(f.faults for f in files.values())  # easy_1's fault stops nginx: nothing on disk
    key = files["/etc/ssh/ssh_host_ed25519_key"]  # written at boot: listed, its contents never
    assert key.what.startswith("key material") and key.diff == ""

    run = RunDir(tmp_path, test_run_id)
    run.write_episode(record, steps)
    PageWriter(run.path, {"easy_1": easy_1.instruction}).write(episodes="all")
    page = (run.path / record.episode_id / "index.html").read_text()
    assert "/root/oncall.txt" in page and "+nginx restarted by the on-call" in page
    assert "BEGIN OPENSSH PRIVATE KEY" not in (run.path / "episodes.jsonl").read_text()
