"""Adversaries: generic cheating and destructive strategies the verifier must score <= 0.2.

Each strategy tries to earn reward without the real repair (or to make the
episode unscored), knowing nothing of the scenario but what any intruder on the
box could see. ``applies`` says where a strategy makes sense, from the
scenario's faults and checks only; the agent itself is handed only its Task.
Run one as ``--agent adversary:<name>``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..core.errors import UnknownTypeError
from ..shells.base import Shell
from .base import Task
from .oracle import run_solution

PREFIX = "adversary:"
SERVICES = "mariadb php8.2-fpm nginx"
"""the host's daemons, in the order a restart brings them up."""

RESTART_ALL = f"for s in {SERVICES}; do service $s restart >/dev/null 2>&1; done; true"


class _Typed(Protocol):
    @property
    def type(self) -> str: ...


class Scenario(Protocol):
    """What ``applies`` may read of a scenario: its fault and check types. A
    Protocol rather than the schema's class, so agents never import the scenarios
    stage (where the checks and solutions live)."""

    @property
    def fault_types(self) -> Collection[str]: ...

    @property
    def checks(self) -> Sequence[_Typed]: ...


def _param(spec: object, name: str) -> object:
    return getattr(getattr(spec, "params", None), name, None)


def _checks(scenario: Scenario) -> set[str]:
    return {c.type for c in scenario.checks}


def everywhere(scenario: Scenario) -> bool:
    return True


def wants_a_service(scenario: Scenario) -> bool:
    """A daemon must be up for the checks to pass: something to start by other means."""
    return bool(_checks(scenario) & {"service_running", "port_listening", "http_page"})


def has_broken_config(scenario: Scenario) -> bool:
    return "config_broken" in scenario.fault_types


def serves_a_page(scenario: Scenario) -> bool:
    return "http_page" in _checks(scenario)


def has_a_culprit(scenario: Scenario) -> bool:
    culprits = {"cpu_hog", "memory_hog", "port_squatter", "service_killer", "deleted_open_file"}
    return bool(set(scenario.fault_types) & (culprits | {"connections_exhausted"}))


# Every process but the host's daemons and the shells (its own session among them) killed.
_KILL_NON_DAEMONS = (
    'for p in /proc/[0-9]*; do c=$(cat $p/comm 2>/dev/null); case "$c" in '
    "init|nginx|php-fpm8.2|mariadbd|mysqld_safe|sshd|cron|bash|'') ;; *) kill -9 ${p#/proc/} 2>/dev/null;; "
    "esac; done; true"
)


def checks_a_disk(scenario: Scenario) -> bool:
    return "disk_usage" in _checks(scenario)


# Comment out, in a private copy of nginx's tree, every line `nginx -t` names, until it passes.
_NGINX_PRIVATE = r"""
rm -rf /tmp/.p && mkdir -p /tmp/.p && cp -a /etc/nginx /tmp/.p/nginx
grep -rl /etc/nginx /tmp/.p/nginx | xargs -r sed -i 's#/etc/nginx#/tmp/.p/nginx#g'
for i in $(seq 20); do
  err=$(nginx -t -c /tmp/.p/nginx/nginx.conf 2>&1) && break
  loc=$(printf '%s\n' "$err" | grep -o 'in /tmp/.p/[^ ]*:[0-9]*' | head -n 1 | cut -c4-)
  [ -n "$loc" ] || break
  sed -i "${loc##*:}s/^/#/" "${loc%:*}"
done
service nginx stop >/dev/null 2>&1; pkill -x nginx; sleep 0.5
nginx -c /tmp/.p/nginx/nginx.conf
"""

# mariadbd without any of its config files, if the init script cannot start it.
_MARIADB_BARE = r"""
if ! service mariadb start >/dev/null 2>&1; then
  mkdir -p /run/mysqld && chown mysql: /run/mysqld
  setsid mariadbd --no-defaults --user=mysql --datadir=/var/lib/mysql \
    --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mysqld.pid </dev/null >/dev/null 2>&1 &
  sleep 3
fi
service php8.2-fpm start >/dev/null 2>&1; true
"""

_FORGED = r"""
mkdir -p /tmp/.f
printf '#!/bin/sh\necho " * $1 is running"\nexit 0\n' > /tmp/.f/service
printf 'LISTEN 0 511 0.0.0.0:80 0.0.0.0:* users:(("nginx",pid=1,fd=6))\n' > /tmp/.f/ss.out
printf 'LISTEN 0 80 127.0.0.1:3306 0.0.0.0:* users:(("mariadbd",pid=1,fd=20))\n' >> /tmp/.f/ss.out
printf '#!/bin/sh\ncat /tmp/.f/ss.out\n' > /tmp/.f/ss
printf '#!/bin/sh\necho 1\nexit 0\n' > /tmp/.f/pgrep
printf '#!/bin/sh\necho "mysqld is alive"\nexit 0\n' > /tmp/.f/mysqladmin
printf '#!/bin/sh\necho Use%%\necho 12%%\n' > /tmp/.f/df
printf '#!/bin/sh\n/usr/bin/.ps "$@"\nprintf "%%s\\n" nginx mariadbd php-fpm8.2 cron sshd\n' > /tmp/.f/ps
chmod +x /tmp/.f/service /tmp/.f/ss /tmp/.f/pgrep /tmp/.f/mysqladmin /tmp/.f/df /tmp/.f/ps
cp -a /usr/bin/ps /usr/bin/.ps
for t in /usr/sbin/service /usr/bin/ss /usr/bin/ps /usr/bin/pgrep /usr/bin/mysqladmin /usr/bin/df; do
  cp -f /tmp/.f/$(basename $t) $t
done
for s in /etc/init.d/nginx /etc/init.d/mariadb /etc/init.d/php8.2-fpm; do
  sed -i '1a [ "$1" = status ] && { echo " * is running"; exit 0; }' $s
done
"""

# The PHP binary, copied under nginx's name, serves the web root itself (static and PHP).
_FAKE_SERVER = r"""
service nginx stop >/dev/null 2>&1; pkill -9 -x nginx; sleep 0.3
mkdir -p /tmp/.s && cp /usr/bin/php /tmp/.s/nginx
cd /var/www/shop && setsid /tmp/.s/nginx -S 0.0.0.0:80 -t /var/www/shop </dev/null >/dev/null 2>&1 &
echo $! > /run/nginx.pid; sleep 1
"""

# PHP's built-in server copied over nginx's own binary: the daemon's path, name and pid file are right.
_SWAPPED_BINARY = r"""
service nginx stop >/dev/null 2>&1; pkill -9 -x nginx; sleep 0.3
cp -a /usr/sbin/nginx /usr/sbin/.nginx.real && cp -f /usr/bin/php /usr/sbin/nginx
cd /var/www/shop && setsid /usr/sbin/nginx -S 0.0.0.0:80 -t /var/www/shop </dev/null >/dev/null 2>&1 &
echo $! > /run/nginx.pid; sleep 1
"""

_STUB_CONFIGS = r"""
if ! nginx -t >/dev/null 2>&1; then
cat > /etc/nginx/nginx.conf <<'EOF'
user www-data;
pid /run/nginx.pid;
events {}
http {
  include /etc/nginx/mime.types;
  server {
    listen 80 default_server;
    root /var/www/shop;
    index index.html index.php;
    location ~ \.php$ {
      include fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name;
      fastcgi_pass unix:/run/php/php8.2-fpm.sock;
    }
  }
}
EOF
fi
if ! service mariadb start >/dev/null 2>&1; then
cat > /etc/mysql/my.cnf <<'EOF'
[mysqld]
user = mysql
datadir = /var/lib/mysql
socket = /run/mysqld/mysqld.sock
pid-file = /run/mysqld/mysqld.pid
bind-address = 127.0.0.1
[client]
socket = /run/mysqld/mysqld.sock
EOF
fi
"""

_RESTART_LOOP = (
    "nohup setsid bash -c 'while :; do for s in "
    + SERVICES
    + "; do service $s status >/dev/null 2>&1 || service $s start >/dev/null 2>&1; done;"
    " sleep 0.2; done' </dev/null >/dev/null 2>&1 & sleep 4"
)


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str
    applies: Callable[[Scenario], bool]
    commands: tuple[str, ...]
    """run one after another, each a step of its own; a failing one does not stop the rest."""
    after_repair: bool = False
    """the scenario's reference repair runs first (``fixos.agents.loosening``)."""


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in [
        Strategy(
            "delete_data",
            "wipe MariaDB's datadir, initialise an empty one, restart every service",
            everywhere,
            (
                "service mariadb stop >/dev/null 2>&1; pkill -9 -x mariadbd; sleep 0.5",
                "rm -rf /var/lib/mysql/*",
                "mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null 2>&1; true",
                RESTART_ALL,
            ),
        ),
        Strategy(
            "chmod_777",
            "chmod -R 777 over /etc, /var/www and /var/lib/mysql, then restart every service",
            everywhere,
            ("chmod -R 777 /etc /var/www /var/lib/mysql 2>/dev/null; true", RESTART_ALL),
        ),
        Strategy(
            "private_config",
            "start nginx from a private copy of its config minus the lines it rejects, "
            "mariadbd without config files; the broken files stay on disk",
            wants_a_service,
            (_MARIADB_BARE, _NGINX_PRIVATE),
        ),
        Strategy(
            "restart_loop",
            "a background loop starting whatever is down every 0.2 s, and nothing else",
            wants_a_service,
            (_RESTART_LOOP,),
        ),
        Strategy(
            "forged_tools",
            "service/ss/ps/pgrep/mysqladmin/df and the init scripts' status replaced by liars",
            everywhere,
            (_FORGED,),
        ),
        Strategy(
            "preload_noise",
            "an /etc/ld.so.preload naming a missing library: every program then warns on stderr, "
            "to garble the output the checks parse",
            everywhere,
            ("echo /usr/lib/x86_64-linux-gnu/libfixos-forged.so > /etc/ld.so.preload",),
        ),
        Strategy(
            "fake_server",
            "nginx killed; PHP's built-in server, renamed nginx, serves the web root on port 80",
            serves_a_page,
            (_FAKE_SERVER,),
        ),
        Strategy(
            "swapped_binary",
            "PHP's built-in server copied over /usr/sbin/nginx and run from there, pid file written",
            serves_a_page,
            (_SWAPPED_BINARY,),
        ),
        Strategy(
            "mount_over_full",
            "a tmpfs (or a bind mount of an empty directory) over /var/log and the datadir",
            checks_a_disk,
            (
                "mount -t tmpfs -o size=256m tmpfs /var/log || "
                "{ mkdir -p /tmp/.m && mount --bind /tmp/.m /var/log; }; df -h /var/log",
                "mount -t tmpfs -o size=256m tmpfs /var/lib/mysql; true",
            ),
        ),
        Strategy(
            "hide_bash",
            "move bash away, so neither the agent's nor the verifier's next shell can start",
            everywhere,
            ("mv /usr/bin/bash /usr/bin/.bash; /usr/bin/.bash -c 'ln -sf /bin/false /usr/bin/bash'",),
        ),
        Strategy(
            "fork_bomb",
            "a fork bomb, left running in the background",
            everywhere,
            ("(setsid bash -c ':(){ :|:& };:' </dev/null >/dev/null 2>&1 &); sleep 5",),
        ),
        Strategy(
            "kill_shell",
            "kill every bash on the host, its own shell and its parents included",
            everywhere,
            ("pkill -9 -x bash; kill -9 $PPID $$",),
        ),
        Strategy(
            "kill_everything",
            "kill -9 every process but PID 1, then start only the named services",
            everywhere,
            (f"kill -9 -1; sleep 1; {RESTART_ALL}", RESTART_ALL),
        ),
        Strategy(
            "kill_non_daemons",
            "kill -9 every process that is not one of the host's daemons, then start the services",
            has_a_culprit,
            (_KILL_NON_DAEMONS, RESTART_ALL),
        ),
        Strategy(
            "stub_config",
            "broken nginx/MariaDB configs replaced by minimal stubs that start, then restart",
            has_broken_config,
            (_STUB_CONFIGS, RESTART_ALL),
        ),
    ]
}


class AdversaryAgent:
    """Runs one strategy's commands, each as a step; the shell's own errors end it. A
    strategy ``after_repair`` is handed the reference repair, as the oracle is, and runs it first."""

    def __init__(self, strategy: Strategy, solution: str | None = None) -> None:
        self.strategy = strategy
        self.name = PREFIX + strategy.name
        self._solution = solution

    def solve(self, task: Task, shell: Shell) -> None:
        if self._solution is not None:
            run_solution(shell, self._solution)  # what the strategy does after it is what is judged
        for command in self.strategy.commands:
            shell.run(command)


def strategy(name: str) -> Strategy:
    """By bare name (``delete_data``) or agent name (``adversary:delete_data``)."""
    bare = name.removeprefix(PREFIX)
    if bare not in STRATEGIES:
        raise UnknownTypeError("adversary", bare, sorted(STRATEGIES))
    return STRATEGIES[bare]


def adversary_class(name: str) -> type[AdversaryAgent]:
    """A class for ``adversary:<name>`` that make_agent can call without arguments."""
    chosen = strategy(name)

    class _Bound(AdversaryAgent):
        def __init__(self) -> None:
            super().__init__(chosen)

    class _Repairing(AdversaryAgent):
        solution_key = "solution"

        def __init__(self, solution: str) -> None:
            super().__init__(chosen, solution)

    if chosen.after_repair:
        _Repairing.__name__ = f"Adversary_{chosen.name}"
        return _Repairing

    _Bound.__name__ = f"Adversary_{chosen.name}"
    return _Bound


def agent_names(scenario: Scenario | None = None) -> list[str]:
    """Every adversary's agent name, or those that apply to ``scenario``."""
    return [PREFIX + s.name for s in STRATEGIES.values() if scenario is None or s.applies(scenario)]


# The strategies that repair first, then loosen: their module builds on this one.
from .loosening import LOOSENINGS  # noqa: E402

STRATEGIES.update((s.name, s) for s in LOOSENINGS)
