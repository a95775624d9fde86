"""Faults on whole services."""

from __future__ import annotations

import random
from typing import Any, Literal

from fixos.models import Outcome
from injector.base import Fault, FaultParams
from shells.base import Shell

ServiceName = Literal["nginx", "mariadb", "php8.2-fpm", "ssh"]


class ServiceStopped(Fault):
    """The service is stopped the way an operator would stop it, and stays down."""

    type = "service_stopped"

    class Params(FaultParams):
        service: ServiceName

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        shell.run(f"service {self.params.service} stop", timeout=30)
        return {}

    def confirm(self, shell: Shell) -> Outcome:
        status = shell.run(f"service {self.params.service} status", timeout=10)
        summary = status.output.strip().splitlines()[-1:] or [""]
        if status.exit_code == 0:
            return Outcome(False, f"service {self.params.service} still running: {summary[0]}")
        return Outcome(True, f"service {self.params.service} status exit {status.exit_code}: {summary[0]}")

    def revert(self, shell: Shell) -> None:
        shell.run(f"service {self.params.service} start", timeout=30)
