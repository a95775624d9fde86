"""The custom agent of docs/agents-and-shells.md (--agent custom_agent_example:RestartWhatIsDown)."""

from fixos.agents import Task
from fixos.shells import Shell


class RestartWhatIsDown:
    name = "restart-what-is-down"

    def solve(self, task: Task, shell: Shell) -> None:
        for service in ("mariadb", "php8.2-fpm", "nginx"):
            if shell.run(f"service {service} status").exit_code != 0:
                shell.run(f"service {service} start")
