"""A host's files read from this machine inside the host's own root
(``fixos.stack.host_files``): what root in the host plants (absolute links, links
through ``/proc``, ``..`` past the root, FIFOs, device nodes, a huge file) never makes
the verifier read this machine's files, hang, or open a device; what it reads is what
the engine's archive gives."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fixos.stack.host_files import HostFiles, local_view
from fixos.stack.hosts import LiveHost

MACHINE_SECRET = Path("/root/.fixos-test-host-files-secret")


def _in_host(live_host: LiveHost, script: str) -> None:
    code, out = live_host._client.containers.get(live_host.handle.container_id).exec_run(["sh", "-c", script])
    assert code == 0, out


@pytest.mark.live
def test_reads_stay_inside_the_host_and_match_the_engine(live_host: LiveHost, tmp_path) -> None:
    view = local_view(live_host._client, live_host.handle.container_id)
    assert view.files is not None and view.layers is not None, "this machine's engine: the local view"
    MACHINE_SECRET.write_text("the machine's own file\n")
    try:
        name = MACHINE_SECRET.name
        _in_host(
            live_host,
            f"ln -s {MACHINE_SECRET} /etc/abs-link; ln -s /root /etc/rootlink; "
            "ln -s ../../../../../../root /etc/dotdot; ln -s /proc/1/root/root /etc/proclink; "
            "mkdir -p /etc/dl-target && echo inner > /etc/dl-target/f && ln -s /etc/dl-target /etc/dl; "
            "mkfifo /etc/a-fifo; mknod /etc/a-null c 1 3; head -c 9000000 /dev/zero > /var/log/huge; "
            f"echo 'the host own' > /root/{name}",
        )
        files = view.files
        # links resolve in the host's root: to the host's files, never to this machine's
        for through in ("/etc/rootlink", "/etc/dotdot"):
            assert files.read(f"{through}/{name}", 2**20) == b"the host own\n", through
        assert files.read(f"/etc/proclink/{name}", 2**20) is None  # no jump through /proc/*/root
        assert files.read("/etc/abs-link", 2**20) is None  # the last component, a link: not followed
        assert files.read("/etc/dl/f", 2**20) == b"inner\n"
        started = time.monotonic()
        assert files.read("/etc/a-fifo", 2**20) is None and files.read("/etc/a-null", 2**20) is None
        assert time.monotonic() - started < 1  # a FIFO is never opened for reading
        assert files.read("/var/log/huge", 8 * 2**20) is None  # over the limit (and on the host's tmpfs)
        assert files.read(f"/root/{name}", 2**20) == b"the host own\n"
        # the same answers as the engine's archive, file by file
        wanted = [
            "/etc/hostname",
            "/etc/nginx/nginx.conf",
            "/etc/abs-link",
            "/etc/a-fifo",
            "/nope",
            "/etc/dl/f",
        ]
        local = {p: files.read(p, 8 * 2**20) for p in wanted}
        live_host._local = type(view)()  # no local view: the engine's archive
        assert live_host.read_files(wanted) == local
    finally:
        MACHINE_SECRET.unlink()


def test_a_process_root_this_process_cannot_open_is_refused() -> None:
    with pytest.raises(OSError):
        HostFiles(2**22 + 12345)  # no such process
