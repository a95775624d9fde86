"""Faults on whole services."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, Literal

from ..core.models import Outcome
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams

ServiceName = Literal["nginx", "mariadb", "php8.2-fpm", "ssh"]

# `service nginx|mariadb stop` signal the daemon as below, then poll for its
# exit once a second: a second of nothing per stop. Same signal, same end state
# (pid file gone, init script reports stopped), polled every 20 ms instead.
_FAST_STOPS = {
    "nginx": (
        "start-stop-daemon --stop --quiet --signal QUIT --pidfile /run/nginx.pid --name nginx",
        "nginx",
    ),
    "mariadb": ("kill -TERM $(cat /run/mysqld/mysqld.pid)", "mysqld_safe|mariadbd"),
}


def stop_service(shell: Shell, service: str, timeout: float = 30) -> None:
    """Stop a service as its init script does, without the init script's idle wait."""
    if service not in _FAST_STOPS:
        shell.run(f"service {service} stop", timeout=timeout)
        return
    signal, processes = _FAST_STOPS[service]
    shell.run(
        f"{signal} 2>/dev/null; for _ in $(seq 1 {int(timeout * 50)}); do "
        f"pgrep -x '{processes}' >/dev/null || break; sleep 0.02; done",
        timeout=timeout + 5,
    )


@FAULTS.register
class ServiceStopped(Fault):
    """The service is stopped the way an operator would stop it, and stays down."""

    type = "service_stopped"

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The service started again."""
        return f"service {self.params.service} start"

    class Params(FaultParams):
        service: ServiceName

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        stop_service(shell, self.params.service)
        return {}

    def confirm(self, shell: Shell) -> Outcome:
        status = shell.run(f"service {self.params.service} status", timeout=10)
        summary = status.output.strip().splitlines()[-1:] or [""]
        if status.exit_code == 0:
            return Outcome(False, f"service {self.params.service} still running: {summary[0]}")
        return Outcome(True, f"service {self.params.service} status exit {status.exit_code}: {summary[0]}")

    def revert(self, shell: Shell) -> None:
        shell.run(f"service {self.params.service} start", timeout=30)
