"""A rule-based SRE that needs no API key.

It works the way a careful engineer does on a box like this: look at services,
processes, disks and logs; recognise the failure from what the daemons say;
make the smallest repair; check again. It sees only its instruction and the
shell, never the scenario's faults, checks or solution, so its score measures
what plain diagnosis can reach.

Honesty: it holds no scenario id and no name or path a fault draws from its
seed (no program names, no install folders). Its rules are an operator's: the
busiest and the largest processes that are not the host's daemons, a script
that kills services, who holds the service's port or a deleted log, what
``nginx -t``, the service logs and the site's error log say. The healthy host
runs background programs of its own (a metrics agent, a queue worker, a log
shipper, a backup job), so "kill what is not a daemon" is not among them.

It reports what it recognised (``report()``: the component, the cause class and
what it saw), each finding as its rule named it, never from the truth. At a
report-only task level (``diagnose``, ``localise``, ``detect``) it looks once and
changes nothing: every command that would change the host is only noted.
"""

from __future__ import annotations

import difflib
import re
import shlex
import time
from typing import Any

from ..shells.base import Shell
from ..shells.probes import sample_cpu
from .base import Task

SERVICES = ("mariadb", "php8.2-fpm", "nginx")  # start order: data, app, web
DAEMONS = {"init", "nginx", "php-fpm8.2", "sshd", "mysqld_safe", "mariadbd", "logger", "cron"}
TRANSIENT = {"bash", "sh", "ps", "sleep", "awk", "cat", "setsid", "sed", "grep", "sort", "head", "tail"}
# Processes holding many sockets, named: a job keeping a pool of database sessions among them.
SOCKET_HOLDERS = (
    "for p in /proc/[0-9]*; do n=$(ls -l $p/fd 2>/dev/null | grep -c socket:); "
    '[ "$n" -gt 5 ] && echo "${p#/proc/} $(cat $p/comm)"; done; true'
)
PROTECTED_LOGS = re.compile(r"/var/log/(nginx/[^/]*\.log|mysql/error\.log|php8\.2-fpm\.log)$")
NGINX_DIRECTIVES = [
    "listen",
    "server_name",
    "root",
    "index",
    "location",
    "try_files",
    "include",
    "fastcgi_pass",
    "fastcgi_param",
    "access_log",
    "error_log",
    "worker_connections",
    "worker_processes",
    "events",
    "http",
    "server",
    "user",
    "pid",
    "sendfile",
    "tcp_nopush",
    "types_hash_max_size",
    "default_type",
    "ssl_protocols",
    "gzip",
    "keepalive_timeout",
]
NGINX_PARAMS = ["default_server", "ssl", "http2", "reuseport", "ipv6only", "deferred", "backlog"]
APP_INI = "/etc/shop/app.ini"
FPM_POOL = "/etc/php/8.2/fpm/pool.d/www.conf"


def _replace(path: str, old: str, new: str) -> str:
    # Edits the file a symlink points to: `perl -i` would put a copy in the link's place.
    return (
        f"O={shlex.quote(old)} N={shlex.quote(new)} perl -0777 -i -pe "
        f"'s/\\Q$ENV{{O}}\\E/$ENV{{N}}/' \"$(readlink -f {shlex.quote(path)})\""
    )


class BaselineAgent:
    name = "baseline"

    def __init__(self) -> None:
        self.acting = True
        self.host = "web"
        self.findings: dict[tuple[str, str], dict[str, str]] = {}

    def solve(self, task: Task, shell: Shell) -> None:
        self.sh = shell
        self.acting = task.level == "repair"
        self.host = self.run("hostname -s").strip() or "web"
        for _ in range(3 if self.acting else 1):
            self.stop_rogue_processes()
            self.free_disk()
            self.repair_services()
            self.repair_site()
            if self.healthy():
                return

    def report(self) -> dict[str, Any]:
        """What it recognised, on the host it works on (it never logs in to another)."""
        findings = list(self.findings.values())
        return {"healthy": not findings, "findings": findings}

    # -- small helpers --------------------------------------------------------

    def note(self, component: str, cause: str, evidence: str) -> None:
        """A finding, once per component (the first rule that named it says why)."""
        key = (self.host, component)
        if key not in self.findings:
            self.findings[key] = {
                "host": self.host,
                "component": component,
                "cause": cause,
                "evidence": evidence,
            }

    def act(self, command: str, timeout: float = 30) -> str:
        """A command that changes the host: run when repairing, else only looked at."""
        return self.run(command, timeout) if self.acting else ""

    def run(self, command: str, timeout: float = 30) -> str:
        return self.sh.run(command, timeout=timeout).output

    def service_up(self, service: str) -> bool:
        return self.sh.run(f"service {service} status >/dev/null 2>&1", timeout=20).exit_code == 0

    def http_code(self, path: str) -> str:
        return self.run(
            f"curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 http://127.0.0.1{path}"
        ).strip()

    def healthy(self) -> bool:
        return self.http_code("/") == "200" and self.http_code("/status") == "200"

    def sql(self, statement: str, *, tries: int = 10) -> str:
        """As root, retried while a flood of clients mid-handshake holds even
        root's spare connection slot ("Too many connections")."""
        out = ""
        for _ in range(tries):
            out = self.run(f"mariadb -N -e {shlex.quote(statement)}")
            if "Too many connections" not in out:
                break
            time.sleep(0.3)
        return out

    def kill(self, pids: list[str]) -> None:
        if pids:
            self.act("kill -9 " + " ".join(pids))

    # -- processes --------------------------------------------------------------

    def stop_rogue_processes(self) -> None:
        rogues = []
        for row in sample_cpu(self.sh, timeout=20):
            if row.percent >= 40 and row.comm not in DAEMONS | TRANSIENT:
                rogues.append(str(row.pid))
                self.note(
                    f"process:{row.pid}", "resource_exhaustion", f"{row.comm} at {row.percent:.0f}% CPU"
                )
        for line in self.run("ps -eo pid=,rss=,comm=").splitlines():
            pid, rss, comm = ([*line.split(None, 2), "", "", ""])[:3]
            if rss.isdigit() and int(rss) > 150 * 1024 and comm not in DAEMONS:
                rogues.append(pid)
                self.note(f"process:{pid}", "resource_exhaustion", f"{comm} holds {int(rss) // 1024} MB")
        # Scripts that kill or stop services (forgotten watchdogs): whatever an
        # interpreter runs, wherever it is installed, read for kill commands.
        scripts = self.run(
            "for p in /proc/[0-9]*; do set -- $(tr '\\0' ' ' < $p/cmdline 2>/dev/null); "
            'case "$1" in */sh|*/bash|*/dash|*/perl|*/python3) [ -f "$2" ] && '
            "grep -qE 'pkill|killall|service .* stop' \"$2\" 2>/dev/null && "
            "echo ${p#/proc/} $(cat $p/comm);; esac; done"
        )
        for line in scripts.splitlines():
            pid, comm = ([*line.split(None, 1), "", ""])[:2]
            if pid.isdigit() and comm not in DAEMONS:
                rogues.append(pid)
                self.note(
                    f"process:{pid}", "scheduled_rebreaker", f"{comm} runs a script that stops services"
                )
        self.kill(sorted(set(rogues)))

    # -- disks ------------------------------------------------------------------

    def usage(self, inodes: bool = False) -> int:
        column = "ipcent" if inodes else "pcent"
        out = self.run(f"df --output={column} /var/log | tail -n 1").strip().rstrip("%")
        return int(out) if out.isdigit() else 0

    def free_disk(self) -> None:
        for inodes in (False, True):
            used = self.usage(inodes=inodes)
            if used > 90:
                what = "inodes" if inodes else "space"
                self.note("fs:/var/log", "resource_exhaustion", f"/var/log at {used}% of its {what}")
        if self.usage() > 90:
            listing = self.run(
                "find /var/log -xdev -type f -size +1M -printf '%s %p\\n' | sort -rn | head -20"
            )
            junk = [
                line.split(" ", 1)[1]
                for line in listing.splitlines()
                if " " in line and not PROTECTED_LOGS.search(line.split(" ", 1)[1])
            ]
            if junk:
                self.act("rm -f -- " + " ".join(shlex.quote(p) for p in junk))
        if self.usage() > 90:
            # Space held by deleted files still open: close them at the holder.
            held = self.run(
                'for fd in /proc/[0-9]*/fd/*; do l=$(readlink $fd 2>/dev/null); case "$l" in '
                "/var/log/*' (deleted)') p=${fd#/proc/}; p=${p%%/*}; "
                "echo $p $fd $(cat /proc/$p/comm);; esac; done"
            )
            for line in held.splitlines():
                pid, fd, comm = ([*line.split(), "", "", ""])[:3]
                if comm in DAEMONS:
                    self.act(f": > {fd}")
                else:
                    self.kill([pid])
        if self.usage(inodes=True) > 90:
            crowded = self.run(
                "find /var/log -xdev -type f | sed 's|/[^/]*$||' | sort | uniq -c | sort -rn | head -1"
            ).split()
            if len(crowded) == 2 and crowded[1] not in ("/var/log", "/var/log/nginx", "/var/log/mysql"):
                self.act(f"rm -rf -- {shlex.quote(crowded[1])}", timeout=120)

    # -- services ---------------------------------------------------------------

    def repair_services(self) -> None:
        for service in SERVICES:
            if self.service_up(service):
                continue
            known = len(self.findings)
            if service == "nginx":
                self.free_port(80, "nginx")
                self.fix_nginx_config()
            self.act(f"service {service} start", timeout=90)
            if service == "mariadb" and not self.service_up("mariadb"):
                self.fix_mariadb()
                self.act("service mariadb start", timeout=90)
            if len(self.findings) == known:  # nothing said why: it was stopped
                self.note(f"service:{service}", "service_stopped", f"{service} was not running")

    def free_port(self, port: int, owner: str) -> None:
        holders = self.run(f"ss -Hltnp 'sport = :{port}'")
        pids = {pid for name, pid in re.findall(r'\("([^"]+)",pid=(\d+)', holders) if name != owner}
        for pid in sorted(pids):
            self.note(f"port:{port}", "port_conflict", f"pid {pid} holds port {port}, not {owner}")
        self.kill(sorted(pids))

    def fix_nginx_config(self) -> None:
        for _ in range(3):
            test = self.run("nginx -t 2>&1")
            if "test is successful" in test:
                return
            where = re.search(r"in (/etc/nginx/\S+):(\d+)", test)
            if not where:
                return
            path, line_no = where.group(1), int(where.group(2))
            self.note("service:nginx", "config_error", f"nginx -t fails at {path}:{line_no}")
            if not self.acting:
                return
            lines = self.run(f"cat {shlex.quote(path)}").split("\n")
            fixed = self._nginx_fix(test, lines, line_no)
            if fixed is None:
                return
            index, new = fixed
            self.act(_replace(path, lines[index], new))

    def _nginx_fix(self, test: str, lines: list[str], line_no: int) -> tuple[int, str] | None:
        line = lines[line_no - 1] if 0 < line_no <= len(lines) else ""
        unknown = re.search(r'unknown directive "([^"]+)"', test)
        if unknown:
            word = unknown.group(1)
            close = difflib.get_close_matches(word, NGINX_DIRECTIVES, n=1)
            return (line_no - 1, line.replace(word, close[0], 1)) if close else None
        param = re.search(r'invalid parameter "([^"]+)"', test)
        if param:
            close = difflib.get_close_matches(param.group(1), NGINX_PARAMS, n=1)
            return (line_no - 1, line.replace(param.group(1), close[0], 1)) if close else None
        missing = re.search(r'open\(\) "(/etc/nginx/[^"]+)" failed', test)
        if missing:
            name = missing.group(1).rsplit("/", 1)[1]
            files = self.run("ls /etc/nginx").split()
            close = difflib.get_close_matches(name, files, n=1)
            return (line_no - 1, line.replace(name, close[0], 1)) if close else None
        if "invalid number of arguments" in test or 'is not terminated by ";"' in test:
            # The statement that lacks its `;` ends on an earlier line.
            for index in range(line_no - 1, -1, -1):
                text = lines[index].rstrip()
                if text and not text.lstrip().startswith("#") and not text.endswith((";", "{", "}")):
                    return index, text + ";"
        return None

    def fix_mariadb(self) -> None:
        log = self.run("tail -n 30 /var/log/mysql/error.log")
        unknown = re.findall(r"unknown variable '([^=']+)=", log)
        suffix = re.findall(r"value '([^']+)'\) *\.? *Legal suffix|\(value '([^']+)'\)", log)
        if unknown or suffix:
            self.note("service:mariadb", "config_error", "its error log: " + (unknown or ["a bad value"])[-1])
        if unknown:
            word = unknown[-1]
            names = self.run("mariadbd --help --verbose 2>/dev/null | awk 'NF == 2 {print $1}'").split()
            options = [n.replace("-", "_") for n in names]
            close = difflib.get_close_matches(word.replace("-", "_"), options, n=1)
            if close:
                for path in self.run(f"grep -rl -- {shlex.quote(word)} /etc/mysql").split():
                    self.act(_replace(path, word, close[0]))
        elif suffix:
            bad = next(v for pair in suffix for v in pair if v)
            good = bad.translate(str.maketrans("OoIl", "0011"))
            for path in self.run(f"grep -rlF -- {shlex.quote(bad)} /etc/mysql").split():
                self.act(_replace(path, f"= {bad}", f"= {good}"))
        if re.search(r"Permission denied|Errcode: 13|Can't create/write", log):
            self.note("file:/var/lib/mysql", "permission", "its error log: permission denied")
            self.act("chown -R mysql:mysql /var/lib/mysql && chmod 755 /var/lib/mysql")

    # -- the site -----------------------------------------------------------------

    def repair_site(self) -> None:
        if self.http_code("/") == "403":
            self.note("file:/var/www/shop", "permission", "the home page answers 403")
            self.act(
                "chown -R www-data:www-data /var/www/shop && chmod 755 /var/www /var/www/shop && "
                "find /var/www/shop -type f -exec chmod 644 {} +"
            )
        code = self.http_code("/status")
        if code == "200":
            return
        log = self.run("tail -n 20 /var/log/nginx/shop.error.log")
        if code == "502":
            self.fix_php_socket(log)
        elif code in ("500", "503"):
            self.fix_app_database(log)

    def fix_php_socket(self, log: str) -> None:
        if not self.service_up("php8.2-fpm"):
            self.note("service:php8.2-fpm", "service_stopped", "/status answers 502, php-fpm is down")
            self.act("service php8.2-fpm start")
            return
        wanted = re.search(r"connect\(\) to unix:(\S+) failed \((\d+)", log)
        if not wanted:
            return
        socket_path, errno = wanted.group(1), wanted.group(2)
        self.note(
            "service:php8.2-fpm", "config_error", f"nginx cannot connect to {socket_path} (errno {errno})"
        )
        if errno == "2":
            self.act(f"sed -i 's|^listen = .*|listen = {socket_path}|' {FPM_POOL}")
        elif errno == "13":
            self.act(
                f"sed -i -e 's|^listen.owner = .*|listen.owner = www-data|' "
                f"-e 's|^listen.group = .*|listen.group = www-data|' -e '/^listen.mode/d' {FPM_POOL}"
            )
        self.act("service php8.2-fpm restart")

    def fix_app_database(self, log: str) -> None:
        ini = dict(re.findall(r"^(\w+) = (.*)$", self.run(f"cat {APP_INI}"), re.MULTILINE))
        user = ini.get("user", "shop")
        if "Too many connections" in log:
            self.note("service:mariadb", "resource_exhaustion", "the app's log: too many connections")
            rows = self.sql("SELECT user FROM information_schema.PROCESSLIST").split()
            hogs = {u for u in rows if rows.count(u) > 5 and u not in ("root", user)}
            holders = [row.split() for row in self.run(SOCKET_HOLDERS).splitlines()]
            self.kill([row[0] for row in holders if len(row) == 2 and row[1] not in DAEMONS])
            for hog in hogs:
                if self.acting:
                    self.sql(f"KILL USER {hog}")
        elif "Access denied" in log and "password" in ini:
            self.note("service:mariadb", "config_error", f"the app's log: access denied for {user}")
            statement = f"ALTER USER '{user}'@'localhost' IDENTIFIED BY '{ini['password']}'"
            self.act(f"mariadb -e {shlex.quote(statement)}")
        elif "command denied" in log:
            self.note("service:mariadb", "permission", f"the app's log: a command denied to {user}")
            grant = f"GRANT SELECT, INSERT, UPDATE ON {ini.get('name', 'shop')}.* TO '{user}'@'localhost'"
            self.act(f"mariadb -e {shlex.quote(grant)}")
        elif "No such file or directory" in log:
            actual = self.run("mariadb -N -e 'SELECT @@socket'").strip()
            if actual.startswith("/") and ini.get("socket") != actual:
                self.note(
                    f"file:{APP_INI}", "config_error", f"the app looks for {ini.get('socket')}, not {actual}"
                )
                self.act(_replace(APP_INI, f"socket = {ini.get('socket')}", f"socket = {actual}"))
        elif re.search(r"getaddrinfo|Unknown MySQL server host|Name or service not known", log):
            self.note("host:db", "dependency", f"the app cannot resolve {ini.get('host')}")
            self.act(_replace(APP_INI, f"host = {ini.get('host')}", "host = localhost"))
