"""Checks on services and sockets, through testinfra."""

from __future__ import annotations

import re
from typing import Any

from fixos.core.models import Outcome
from fixos.verifier.base import CHECKS, Check, CheckParams, Probe


@CHECKS.register
class ServiceRunning(Check):
    """The init system reports the service running."""

    type = "service_running"

    class Params(CheckParams):
        service: str

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        running = probe.host.service(self.params.service).is_running
        state = "running" if running else "not running"
        return Outcome(running, f"service {self.params.service} is {state}")


@CHECKS.register
class PortListening(Check):
    """Something listens on the TCP port inside the host (optionally: a named program)."""

    type = "port_listening"

    class Params(CheckParams):
        port: int
        program: str | None = None
        """when set, the listener must be this program (as ``ss -p`` names it)."""

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        port = self.params.port
        suffix = f":{port}"
        sockets = [
            s
            for s in probe.host.socket.get_listening_sockets()
            if s.startswith("tcp://") and s.endswith(suffix)
        ]
        if not sockets:
            return Outcome(False, f"nothing listens on tcp port {port}")
        if self.params.program is None:
            return Outcome(True, f"tcp port {port} is listening ({', '.join(sockets)})")
        owners = probe.shell.run(f"ss -Hltnp 'sport = :{port}'", timeout=10).output
        names = sorted(set(re.findall(r'\(\("([^"]+)"', owners)))
        ok = names == [self.params.program]
        return Outcome(ok, f"tcp port {port} held by {', '.join(names) or 'an unknown program'}")
