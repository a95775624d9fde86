"""The gate "keeps this episode's SSH keys, trusts no other" (``identities_kept``): the
host keys made at first boot and root's accepted keys are recorded on the episode's own
host once the faults are in, and a key added, regenerated or replaced by a link fails,
named; a host key of a type sshd does not offer, added beside them, does not."""

from __future__ import annotations

import pytest
from test_inspector import host, image, in_host  # noqa: F401  (fixtures)

from fixos.stack.inspector import HOST_ROOT
from fixos.stack.judge import Judge
from fixos.verifier import CHECKS, Probe, backend


@pytest.mark.live
def test_a_key_added_or_regenerated_fails_naming_the_file(client, host, image, test_run_id):  # noqa: F811
    check = CHECKS.get("identities_kept")(CHECKS.get("identities_kept").Params())
    episode_key = "mkdir -p /root/.ssh && echo 'ssh-ed25519 AAAAepisode harness' > /root/.ssh/authorized_keys"
    assert in_host(client, host, episode_key)[0] == 0
    with Judge(client, image, run_id=test_run_id) as judge:
        shell = judge.session(host)
        try:
            probe = Probe(backend.testinfra_host(shell, host.name), shell, host, root=HOST_ROOT)
            snapshot = check.snapshot(probe)
            assert check.evaluate(probe, snapshot).passed  # the healthy proof: nothing recorded yet
            baseline = check.refine(probe, snapshot)
            assert {"/root/.ssh/authorized_keys", "/etc/ssh/ssh_host_ed25519_key"} <= set(baseline["keys"])
            assert check.evaluate(probe, baseline).passed
            # sshd offers only the two types its configuration names: a third beside them is no change
            assert (
                in_host(client, host, "ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_extra_key")[0] == 0
            )
            outcome = check.evaluate(probe, baseline)
            assert outcome.passed, outcome.detail
            hostile = (
                "echo 'ssh-ed25519 AAAAstranger x' >> /root/.ssh/authorized_keys && "
                "ln -s /root/.ssh/authorized_keys /root/.ssh/authorized_keys2 && "
                "rm /etc/ssh/ssh_host_ecdsa_key.pub && "
                "rm /etc/ssh/ssh_host_ed25519_key* && "
                "ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key"
            )
            code, out = in_host(client, host, hostile)
            assert code == 0, out
            outcome = check.evaluate(probe, baseline)
            assert not outcome.passed
            assert outcome.detail == (
                "keys differ from this episode's: added: /root/.ssh/authorized_keys2; "
                "deleted: /etc/ssh/ssh_host_ecdsa_key.pub; changed: /etc/ssh/ssh_host_ed25519_key, "
                "/etc/ssh/ssh_host_ed25519_key.pub, /root/.ssh/authorized_keys"
            ), outcome.detail
        finally:
            shell.close()
