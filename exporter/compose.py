"""A multi-host scenario as a Harbor docker-compose environment.

Harbor runs the agent and the verifier in the ``main`` service; FixOS makes
``main`` the scenario's login host and adds one service per other host, built
from the same Dockerfile. Each service carries what the harness gives a host of
a split stack (``fixos.stack.roles``): its role, its services and its peers'
names in its environment (the image's ``fixos-role`` boot script reads them),
its host name as a network alias, and the episode key that lets root on any
host ``ssh`` to the others. Each host breaks itself once at boot with its own
share of the captured commands (``break-host.d/<host>``); the login host calls
itself broken only once every peer has.

The key is derived from the scenario and seed, so the same seed still gives the
same bytes. It is no secret: every host of the task holds it, as every host of
a FixOS episode holds the episode's key, and the task's files are public.
"""

from __future__ import annotations

import base64
import hashlib
import shlex
import struct

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from ..scenarios.schema import HostSpec, Scenario
from ..stack.roles import PEER_KEY, PEER_SSH_CONFIG, role_environment

HOST_ENV = "FIXOS_HOST"
"""which of the task's hosts a container is: picks its share of the break."""
BREAK_DIR = "/usr/local/share/fixos/break-host.d"
PEER_WAIT_TRIES = 3000
"""0.2 s apart: how long the login host waits for its peers to break themselves."""


def login_of(scenario: Scenario) -> HostSpec:
    """The host the agent works on: Harbor's ``main`` service."""
    login = getattr(scenario, "login", None) or scenario.hosts[0].name
    return next(h for h in scenario.hosts if h.name == login)


def is_multi_host(scenario: Scenario) -> bool:
    return len(scenario.hosts) > 1


# -- the episode key, as OpenSSH writes it, without its random check number ------


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def peer_key(scenario: Scenario, seed: int) -> tuple[str, str]:
    """(private key in OpenSSH's format, public ``authorized_keys`` line) of the task's key."""
    secret = hashlib.sha256(f"fixos-export:{scenario.id}:{seed}".encode()).digest()
    key = Ed25519PrivateKey.from_private_bytes(secret)
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    blob = _string(b"ssh-ed25519") + _string(public)
    comment = f"fixos-{scenario.id}-s{seed}".encode()
    check = struct.pack(">I", int.from_bytes(secret[:4], "big"))  # OpenSSH draws it at random
    private = check + check + _string(b"ssh-ed25519") + _string(public) + _string(secret + public)
    private += _string(comment)
    private += bytes(range(1, 1 + (-len(private)) % 8))
    body = b"openssh-key-v1\0" + _string(b"none") + _string(b"none") + _string(b"")
    body += struct.pack(">I", 1) + _string(blob) + _string(private)
    encoded = base64.b64encode(body).decode()
    lines = [encoded[i : i + 70] for i in range(0, len(encoded), 70)]
    text = "\n".join(["-----BEGIN OPENSSH PRIVATE KEY-----", *lines, "-----END OPENSSH PRIVATE KEY-----", ""])
    return text, f"ssh-ed25519 {base64.b64encode(blob).decode()} {comment.decode()}\n"


def ssh_files(scenario: Scenario, seed: int) -> dict[str, tuple[str, int]]:
    """Files (path in the host -> text, mode) that let root on any host ssh to the others."""
    private, public = peer_key(scenario, seed)
    return {
        PEER_KEY: (private, 0o600),
        "/root/.ssh/config": (PEER_SSH_CONFIG.format(key=PEER_KEY), 0o600),
        "/root/.ssh/authorized_keys": (public, 0o600),
    }


# -- docker-compose.yaml --------------------------------------------------------


def _service(
    name: str, spec: HostSpec, scenario: Scenario, *, main: bool, log_line: str, cpus: float
) -> list[str]:
    env = {HOST_ENV: spec.name, **role_environment(spec, scenario.hosts)}
    caps = ["SYS_PTRACE", *spec.caps]
    lines = [f"  {name}:", "    build:"]
    if not main:  # Harbor builds main from its own context; the others from the same directory
        lines.append("      context: ${CONTEXT_DIR}")
    lines += [
        "      args:",
        "        BASE: ${FIXOS_BASE_IMAGE:-debian:bookworm-slim}",
        "        PIP_OPTIONS: ${FIXOS_PIP_OPTIONS:-}",
        f"    hostname: {spec.name}",
        "    environment:",
        *(f"      {k}: {shlex.quote(v)}" for k, v in sorted(env.items())),
        "    networks:",
        "      default:",
        f"        aliases: [{spec.name}]",
        "    tmpfs:",
        f"      - {log_line}",
        "    cap_add:",
        *(f"      - {c}" for c in caps),
        f"    pids_limit: {spec.pids}",
    ]
    if not main:  # main's come from task.toml, which Harbor reads
        lines += [f"    mem_limit: {spec.memory_mb}m", f"    cpus: {cpus:g}"]
    return lines


def compose_yaml(scenario: Scenario) -> str:
    login = login_of(scenario)
    out = [
        "# Merged by Harbor into its own compose file. main is the host the agent logs",
        f"# into ({login.name}); every other host of the scenario is a service of its own,",
        "# reachable by its name. Harbor passes no build arguments; these come from the",
        "# environment Harbor runs in.",
        "services:",
    ]
    for spec in [login, *(h for h in scenario.hosts if h.name != login.name)]:
        log_line = f"/var/log:size={spec.log_disk_mb}m,nr_inodes={spec.log_disk_inodes},mode=0755"
        if spec.tmp_disk_mb is not None:  # a second entry of the same tmpfs list
            log_line += f"\n      - /tmp:size={spec.tmp_disk_mb}m,mode=1777"
        name = "main" if spec is login else spec.name
        out += _service(name, spec, scenario, main=spec is login, log_line=log_line, cpus=spec.cpus)
    return "\n".join(out) + "\n"


# -- breaking each host ------------------------------------------------------------


DISPATCH = f"""\
#!/bin/bash
# Each host of this task breaks itself with its own share of the commands.
exec {BREAK_DIR}/"${{{HOST_ENV}:?}}"
"""


def wait_for_peers(scenario: Scenario, marker: str) -> str:
    """Lines for the login host's break script: wait until every peer says it is broken."""
    login = login_of(scenario)
    lines = ["# The agent meets the task once every host is broken, as FixOS confirmed them."]
    for spec in scenario.hosts:
        if spec.name != login.name:
            test = f"ssh -o BatchMode=yes -o ConnectTimeout=2 {spec.name} test -e {marker}"
            lines.append(f"for _ in $(seq 1 {PEER_WAIT_TRIES}); do {test} && break; sleep 0.2; done")
    return "\n".join(lines) + "\n"
