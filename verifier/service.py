"""Checks on services and sockets, through testinfra."""

from __future__ import annotations

import re
from typing import Any

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Facts, Probe
from .vantage import SERVICE_DAEMONS, service_running_command


@CHECKS.register
class ServiceRunning(Check):
    """The service runs, as its init script's ``status`` would say: its pid file names a
    live process of its daemon. Asked with the verifier's own tools (``service X status``
    would run the host's script, its sh and whatever it sources); a service the verifier
    knows no daemon of is asked of the init system in the host's own session only."""

    type = "service_running"

    class Params(CheckParams):
        service: str

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        return facts.processes() + facts.files(["/run"])  # the daemon and its pid file

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        service = self.params.service
        if service in SERVICE_DAEMONS:
            running = probe.shell.run(service_running_command(service, probe.root), timeout=10).ok
        elif probe.root:
            return Outcome(False, f"no daemon known for service {service}: cannot judge it from outside")
        else:
            running = probe.host.service(service).is_running
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

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        return facts.processes() + facts.listening()

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        port = self.params.port
        suffix = f":{port}"
        owners = probe.tcp_owners(port)
        if owners is not None:  # from this machine: no ss in the judge
            lines = probe.listener_lines() or []
            sockets = [
                f"tcp://{line[4:]}" for line in lines if line.startswith("tcp ") and line.endswith(suffix)
            ]
            return self._judged(sockets, owners)
        sockets = [
            s
            for s in probe.host.socket.get_listening_sockets()
            if s.startswith("tcp://") and s.endswith(suffix)
        ]
        if not sockets or self.params.program is None:
            return self._judged(sockets, [])
        owners = probe.shell.run(f"ss -Hltnp 'sport = :{port}'", timeout=10).output
        return self._judged(sockets, sorted(set(re.findall(r'\(\("([^"]+)"', owners))))

    def _judged(self, sockets: list[str], names: list[str]) -> Outcome:
        port = self.params.port
        if not sockets:
            return Outcome(False, f"nothing listens on tcp port {port}")
        if self.params.program is None:
            return Outcome(True, f"tcp port {port} is listening ({', '.join(sockets)})")
        ok = names == [self.params.program]
        return Outcome(ok, f"tcp port {port} held by {', '.join(names) or 'an unknown program'}")
