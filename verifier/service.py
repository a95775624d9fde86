"""Checks on services and sockets, through testinfra."""

from __future__ import annotations

from typing import Any

from fixos.models import Outcome
from verifier.base import Check, CheckParams, Probe


class ServiceRunning(Check):
    """The init system reports the service running."""

    type = "service_running"

    class Params(CheckParams):
        service: str

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        running = probe.host.service(self.params.service).is_running
        state = "running" if running else "not running"
        return Outcome(running, f"service {self.params.service} is {state}")


class PortListening(Check):
    """Something listens on the TCP port inside the host (optionally: a named program)."""

    type = "port_listening"

    class Params(CheckParams):
        port: int
        program: str | None = None
        """when set, the listener must be this program (as ``ss -p`` names it)."""

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        port = self.params.port
        listening = (
            probe.host.socket(f"tcp://0.0.0.0:{port}").is_listening
            or probe.host.socket(f"tcp://:::{port}").is_listening
        )
        if not listening:
            return Outcome(False, f"nothing listens on tcp port {port}")
        if self.params.program is None:
            return Outcome(True, f"tcp port {port} is listening")
        owners = probe.shell.run(f"ss -Hltnp 'sport = :{port}'", timeout=10).output
        ok = f'"{self.params.program}"' in owners
        who = owners.strip().replace("\n", "; ")[:200]
        return Outcome(ok, f"tcp port {port} held by: {who}")
