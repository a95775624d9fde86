"""``fixos.stack.overlay``: what a host changed, read from its overlay2 upper directory
where the engine is this machine's, instead of the engine's ``docker diff`` (about a
second a call). Live: it lists whatever the engine lists, with the same kinds. It
also lists what the engine misses: a program patched in place to the same size,
with its time set back. And the programs gate fails on that."""

from __future__ import annotations

import docker
import pytest

from fixos.stack.hosts import LiveHost
from fixos.stack.overlay import local_layers, overlay_changes
from fixos.verifier.base import Probe
from fixos.verifier.steady import ProgramsUnchanged


def test_layers_are_used_only_where_this_machine_mounted_them() -> None:
    inspect = {
        "GraphDriver": {"Name": "overlay2", "Data": {"UpperDir": "/nonexistent/diff", "LowerDir": "/x"}},
        "State": {"Pid": 1},  # this machine's init mounts no such upper directory
    }
    assert local_layers(inspect) is None
    assert local_layers({**inspect, "GraphDriver": {"Name": "btrfs", "Data": {}}}) is None
    assert local_layers({**inspect, "State": {"Pid": 0}}) is None


def _engine_diff(client: docker.DockerClient, host: LiveHost) -> dict[str, str]:
    return {row["Path"]: "CAD"[row["Kind"]] for row in client.api.diff(host.handle.container_id)}


@pytest.mark.live
def test_the_walk_lists_what_the_engine_lists_and_what_it_misses(
    client: docker.DockerClient, live_host: LiveHost
) -> None:
    edits = (
        "echo x >> /usr/bin/ps; touch /usr/local/bin/newtool; rm /usr/bin/top; rm -r /usr/share/doc/cron; "
        "mkdir /opt/newdir && echo hi > /opt/newdir/f; "
        # replaced as a whole: overlay makes the new directory opaque
        "rm -r /usr/share/doc/procps && mkdir /usr/share/doc/procps && touch /usr/share/doc/procps/new; "
        # the same size, its time set back: the engine's diff compares size, mode and time
        "cp -p /usr/bin/free /tmp/ref && printf X | dd of=/usr/bin/free bs=1 seek=100 conv=notrunc "
        "2>/dev/null && touch -r /tmp/ref /usr/bin/free && ! cmp -s /tmp/ref /usr/bin/free"
    )
    assert live_host.run_program(["sh", "-c", edits]).ok
    layers = local_layers(client.api.inspect_container(live_host.handle.container_id))
    assert layers is not None  # this machine's engine
    walked = overlay_changes(layers)
    assert walked is not None
    engine = _engine_diff(client, live_host)
    missing = {p: k for p, k in engine.items() if walked.get(p) != k}
    assert not missing, missing  # everything the engine lists, with its kind
    assert walked["/usr/bin/ps"] == "C" and walked["/usr/local/bin/newtool"] == "A"
    assert walked["/usr/bin/top"] == "D" and walked["/usr/share/doc/cron"] == "D"
    assert walked["/opt/newdir"] == "A" and walked["/opt/newdir/f"] == "A"
    assert walked["/usr/share/doc/procps/new"] == "A"
    assert walked["/usr/share/doc/procps/copyright"] == "D"  # hidden by the opaque directory
    assert walked["/usr/bin/free"] == "C" and "/usr/bin/free" not in engine
    assert live_host.changes() == walked  # what the programs gate asks


@pytest.mark.live
def test_the_programs_gate_sees_a_same_size_patch_with_its_time_set_back(live_host: LiveHost) -> None:
    gate = ProgramsUnchanged(ProgramsUnchanged.Params())
    probe = Probe(None, None, live_host, True)  # type: ignore[arg-type]
    baseline = gate.snapshot(probe)
    assert gate.evaluate(probe, baseline).passed
    patch = (
        "cp -p /usr/bin/free /tmp/ref && printf X | dd of=/usr/bin/free bs=1 seek=100 conv=notrunc "
        "2>/dev/null && touch -r /tmp/ref /usr/bin/free"
    )
    assert live_host.run_program(["sh", "-c", patch]).ok
    outcome = gate.evaluate(probe, baseline)
    assert not outcome.passed and "changed /usr/bin/free" in outcome.detail, outcome.detail
