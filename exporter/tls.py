"""The shop's HTTPS in an exported task: the healthy certificates, and the CA the verifier trusts.

At stack up FixOS gives a host with nginx certificates of an episode CA made in
the harness's memory (``fixos.stack.tls``); the image itself holds only a
placeholder pair. A task whose scenario is about HTTPS (a TLS fault or a
``tls_valid`` check) takes the healthy ``/etc/ssl/shop`` of the captured host into
its environment, so the replayed faults move the same files, and gives the CA's
certificate (public; its key never left the harness, so no host and no task file
holds it) to the verifier through tests/spec.json, where the agent cannot replace
it. Other tasks keep the placeholder pair: their exports stay byte for byte the same.

The certificates are issued at export, and a task is run long after: the captured
host's CA, site and staging certificates are made to last a century
(``EXPORT_VALIDITY``) instead of an episode's 90 days, so an exported HTTPS task
does not expire (the previous certificate is still the one that expired a month
before issue: the faults that reinstall it stay faults).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from ..scenarios.schema import Scenario
from ..shells.base import Shell
from ..stack.tls import SITE_NAME, TLS_DIR, Validity
from ..verifier import CheckEntry

EXPORT_VALIDITY = Validity(days=100 * 365)
"""how long an exported task's live certificates last from its export."""
HTTPS_PORT = 443
"""where the exported verifier reaches the site: nginx's own port, inside the host."""

# Each regular file of the directory: name, octal mode, content in base64, one line each.
_READ = (
    f'cd {TLS_DIR} && for f in *; do [ -f "$f" ] && '
    'printf "%s %s %s\\n" "$f" "$(stat -c %a "$f")" "$(base64 -w0 < "$f")"; done'
)


@dataclass
class SiteExport:
    """What a task keeps of one host's HTTPS."""

    host: str
    ca_pem: str
    """the episode CA's certificate: for the verifier (spec.json), never its key."""
    files: dict[str, tuple[str, int]] = field(default_factory=dict)
    """path on the host -> (text, mode): the healthy /etc/ssl/shop."""


def about_https(scenario: Scenario, checks: list[CheckEntry]) -> bool:
    """Whether the scenario breaks or judges HTTPS, so its task needs the episode's certificates."""
    judged = any(c.type == "tls_valid" for c in checks)
    return judged or any(t.startswith("tls_") for t in scenario.fault_types)


def read_site(shell: Shell, host: str, ca_pem: str) -> SiteExport:
    """The healthy certificates of a host, read through its shell before any fault goes in."""
    result = shell.run(_READ, timeout=30)
    if result.exit_code != 0:
        raise RuntimeError(f"cannot read {TLS_DIR} on {host}: {result.output.strip()[-200:]}")
    site = SiteExport(host, ca_pem)
    for line in result.output.splitlines():
        name, mode, data = line.split(" ", 2)
        site.files[f"{TLS_DIR}/{name}"] = (base64.b64decode(data).decode(), int(mode, 8))
    return site


def hosts_line() -> str:
    """The line a replay runs on the site's host: its name resolves there, as FixOS's stack up made it."""
    return f"grep -q ' {SITE_NAME}$' /etc/hosts || echo '127.0.0.1 {SITE_NAME}' >> /etc/hosts"


def verifier_record(site: SiteExport) -> dict[str, object]:
    """spec.json's ``tls`` entry: what ``verifier/tls.py`` reads as ``access.tls`` in the task."""
    return {"host": site.host, "name": SITE_NAME, "port": HTTPS_PORT, "ca_pem": site.ca_pem}
