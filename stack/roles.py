"""What makes a host one part of a split shop (web -> app -> db): the container
environment its boot script (``/etc/init.d/fixos-role`` in the server image)
reads, the readiness probes of each role, and the episode key every host of a
multi-host stack holds so the agent can ``ssh`` from its login host to the others.
"""

from __future__ import annotations

import shlex

from ..core.errors import StackError
from ..scenarios.schema import HostSpec
from ..shells.base import Shell
from ..shells.ssh import EpisodeKey

ROLE_PROBES = {
    # nginx on the web host passes PHP here, over the episode's network.
    "app": "nc -z -w 2 127.0.0.1 9000",
    # the app host's PHP reaches MariaDB by this host's name, over TCP.
    "db": "nc -z -w 2 {name} 3306",
}
PEER_KEY = "/root/.ssh/id_ed25519"
"""where a multi-host stack's hosts keep the episode's private key (any key type: ssh
tries this name by default), so ``ssh db`` works from the login host at once."""
PEER_SSH_CONFIG = """Host *
    User root
    IdentityFile {key}
    StrictHostKeyChecking accept-new
    UserKnownHostsFile /root/.ssh/known_hosts
    LogLevel ERROR
"""


def role_environment(spec: HostSpec, specs: list[HostSpec]) -> dict[str, str]:
    """What the host's boot script (/etc/init.d/fixos-role) reads: its role, its
    services, and the names of the hosts holding the other roles."""
    env = {"FIXOS_ROLE": spec.role, "FIXOS_SERVICES": " ".join(spec.services)}
    if spec.decoys:
        env["FIXOS_DECOYS"] = " ".join(spec.decoys)
    for role in ("web", "app", "db"):
        holder = next((h.name for h in specs if h.role == role), None)
        if holder is not None:
            env[f"FIXOS_{role.upper()}_HOST"] = holder
    return env


def install_peer_key(shell: Shell, key: EpisodeKey) -> None:
    """The episode's private key and an ssh config on this host: from any host of
    the stack (the login host first of all) ``ssh db`` logs in as root at once."""
    config = PEER_SSH_CONFIG.format(key=PEER_KEY)
    result = shell.run(
        f"umask 077 && printf '%s' {shlex.quote(key.private_text())} > {PEER_KEY} && "
        f"printf '%s' {shlex.quote(config)} > /root/.ssh/config",
        timeout=10,
    )
    if not result.ok:
        raise StackError(f"cannot give the episode's key to a host: {result.output.strip()[-200:]}")
