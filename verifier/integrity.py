"""Steady-state gates on the data and the daemons: every table is the healthy
host's, and nginx, php-fpm and MariaDB run the way their init scripts start
them, from their packaged binaries, with the configuration on disk, which
passes the daemon's own test.

Like every steady check (``fixos.verifier.steady``), what the faults disturbed
is dropped at ``refine``; the rest must be as on the healthy host.
"""

from __future__ import annotations

import re
import time
from typing import Any

from pydantic import Field

from ..core.models import Outcome
from .base import CHECKS, Check, CheckParams, Facts, Probe
from .config_tests import ARGV, CONFIG_NAMES, CONFIG_NEIGHBOURS, CONFIG_TREES, tests_in_host
from .grants import GRANT_TABLES, grant_rows, grants_beyond, quoted
from .steady import named

_SYSTEM_SCHEMAS = ("information_schema", "performance_schema", "sys", "mysql")

_LIST = (
    "SELECT CONCAT('D ', schema_name) FROM information_schema.schemata; "
    "SELECT CONCAT('T ', table_schema, '.', table_name) FROM information_schema.tables "
    "WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ({system})"
).format(system=", ".join(f"'{s}'" for s in _SYSTEM_SCHEMAS))


def _contents(probe: Probe, also: list[str]) -> dict[str, Any] | str:
    """Databases and ``table -> checksum`` (CHECKSUM TABLE; ``NULL`` for a table
    that is gone) of every table outside the system schemas, plus ``also``;
    the server's answer as a string when it cannot be asked."""
    listing = probe.sql(_LIST)
    if not listing.ok:
        return listing.output.strip()[-200:] or f"mariadb exited {listing.exit_code}"
    rows = listing.output.splitlines()
    databases = sorted(r[2:] for r in rows if r.startswith("D ") and r[2:] not in _SYSTEM_SCHEMAS)
    tables = sorted({*(r[2:] for r in rows if r.startswith("T ")), *also})
    sums = probe.sql("CHECKSUM TABLE " + ", ".join(quoted(t) for t in tables), timeout=30)
    if not sums.ok:
        return sums.output.strip()[-200:] or f"mariadb exited {sums.exit_code}"
    checksums = dict.fromkeys(tables, "NULL")
    for row in sums.output.splitlines():
        table, _, value = row.partition("\t")
        if table in checksums:
            checksums[table] = value.strip()
    return {"databases": databases, "tables": checksums}


@CHECKS.register
class DatabaseUnchanged(Check):
    """Every database and every table (and the grant tables) holds what it held on
    the healthy host, by MariaDB's own CHECKSUM TABLE."""

    type = "database_unchanged"

    class Params(CheckParams):
        grant_tables: list[str] = list(GRANT_TABLES)
        faults_change_grants: bool = False
        """a fault changes accounts or grants (the scenario's claims say so): when the faults
        also leave the server down, what they did to the grants is unseen, and not judged."""

    def snapshot(self, probe: Probe) -> Any:
        contents = _contents(probe, self.params.grant_tables)
        rows = grant_rows(probe, self.params.grant_tables) if self.params.grant_tables else {}
        if isinstance(contents, str) or isinstance(rows, str):
            raise RuntimeError(
                f"cannot read the healthy host's tables: {contents if isinstance(contents, str) else rows}"
            )
        return {**contents, "grant_rows": rows, "read_after_faults": True}

    def refine(self, probe: Probe, baseline: Any) -> Any:
        now = _contents(probe, self.params.grant_tables)
        if isinstance(now, str):
            # The faults took the server down (or hold every slot): its data is judged
            # later; so are the grants, as the healthy host had them, unless a fault
            # changed them unseen (a password rotated, then the server stopped).
            grants = set(self.params.grant_tables) if self.params.faults_change_grants else set()
            tables = {t: s for t, s in baseline["tables"].items() if t not in grants}
            return {**baseline, "tables": tables, "read_after_faults": False}
        # A grant table a fault changed (an account added, a password rotated) leaves the
        # checksums, but is judged row by row: the rows as the faults left them are allowed,
        # and nothing else (GRANT ALL to the shop's account beside a batch job's account).
        rows = grant_rows(probe, self.params.grant_tables) if self.params.grant_tables else {}
        return {
            "databases": [d for d in baseline["databases"] if d in now["databases"]],
            "tables": {t: s for t, s in baseline["tables"].items() if now["tables"].get(t) == s},
            "grant_rows": baseline.get("grant_rows", {}),
            # unreadable now (every connection taken): only the healthy rows pass, never all
            "grant_rows_after_faults": rows if isinstance(rows, dict) else {},
            "read_after_faults": True,
        }

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        # InnoDB writes its redo log at every commit, MyISAM and Aria their files, DDL its own
        return facts.processes() + facts.files(["/var/lib/mysql"])

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        now = _contents(probe, self.params.grant_tables)
        if isinstance(now, str):
            if not baseline["read_after_faults"]:
                return Outcome(
                    True, f"server down as the faults left it (the scenario's checks judge it): {now}"
                )
            return Outcome(False, f"cannot read the tables: {now}")
        problems = []
        gone = [d for d in baseline["databases"] if d not in now["databases"]]
        if gone:
            problems.append("databases gone: " + named(gone))
        missing = [t for t, s in baseline["tables"].items() if now["tables"].get(t, "NULL") == "NULL" != s]
        if missing:
            problems.append("tables gone: " + named(missing))
        changed = [t for t, s in baseline["tables"].items() if t not in missing and now["tables"].get(t) != s]
        if changed:
            problems.append("tables changed: " + named(changed))
        judged = set(self.params.grant_tables) - set(baseline["tables"])
        if baseline.get("grant_rows_after_faults") is not None and judged:
            rows = grant_rows(probe, sorted(judged))
            widened = [rows] if isinstance(rows, str) else grants_beyond(baseline, rows)
            if widened:
                problems.append("grants changed beyond the faults: " + "; ".join(widened))
        if problems:
            return Outcome(False, "; ".join(problems))
        return Outcome(True, f"{len(baseline['tables'])} tables as on the healthy host")


DAEMONS: dict[str, str] = {
    "nginx": "nginx -t -q",
    "php-fpm8.2": "php-fpm8.2 -t",
    "mariadbd": "mariadbd --help --verbose >/dev/null",
}
"""process name -> the daemon's own test of the configuration on disk."""

# Only bash builtins walk /proc (no program to fake but readlink, which the
# programs gate covers), in a subshell so the session keeps none of its
# variables: ``P pid ppid comm`` for every process, then ``M pid exe TAB
# cmdline`` for each daemon's processes. The config tests run after the walk
# (`nginx -t` is a process named nginx too), side by side: ``T name rc TAB
# first line``.
_PROCS = r"""(m=(); for d in /proc/[0-9]*; do
  read -r s < "$d/stat" 2>/dev/null || continue
  r=${s##*) }; set -- $r; c=${s#*(}; c=${c%)*}
  builtin printf 'P %s %s %s\n' "${d#/proc/}" "$2" "$c"
  case " __NAMES__ " in *" $c "*)
    mapfile -d '' a < "$d/cmdline" 2>/dev/null
    builtin printf 'M %s %s\t%s\n' "${d#/proc/}" "$(readlink "$d/exe")" "${a[*]}"; m+=("${d#/proc/}");;
  esac
done
for p in "${m[@]}"; do [ -d "/proc/$p" ] && builtin printf 'L %s\n' "$p"; done)"""
"""``L pid``: a daemon's process still alive once the walk ended. One that exited meanwhile
(an init script's ``mariadbd --print-defaults``, caught between its name and its command
line) is no master; a master stays, and a process that blanks its command line stays too,
so it is judged, and fails."""
_TEST = """(o=$({test} 2>&1); r=$?; builtin printf 'T %s %s\\t%s\\n' {name} $r "${{o%%$'\\n'*}}") &"""


Masters = dict[str, list[dict[str, Any]]]

ONE_SHOT: dict[str, frozenset[str]] = {
    "nginx": frozenset({"-t", "-T", "-v", "-V", "-h", "-?"}),
    "php-fpm8.2": frozenset({"-t", "-tt", "--test", "-v", "--version", "-i", "--info", "-m", "-h", "--help"}),
    "mariadbd": frozenset({"--print-defaults", "--help", "--version", "-V", "-?"}),
}
"""flags with which the packaged daemon prints or tests and exits at once: such a process is
an init script's helper, never a master. MariaDB's start polls `mariadbd --print-defaults`
every second while the server does not answer, and goes on polling after the durability
phase gave up on a start the agent left broken: caught in the walk, it read as a second
master and zeroed a partial repair (split_2)."""


def one_shot(name: str, exe: str, cmdline: str) -> bool:
    """Whether this process of ``name`` is the packaged binary run to print or test and exit."""
    args = cmdline.split()[1:]
    return exe == ARGV[name][0] and any(a in ONE_SHOT[name] for a in args)


AGAIN_SECONDS = 0.05
"""how long after a blank command line it is read again: longer than an exec takes."""
_RETRY_LOG = re.compile(r"(?:^| )--log-error=/tmp/tmp\.[A-Za-z0-9]{10}\.err(?= |$)")
_ANY_LOG = re.compile(r"(?:^| )--log-error=\S+(?= |$)")


def init_retry(name: str, master: dict[str, Any], healthy_cmdline: str) -> bool:
    """Whether this master is MariaDB's init script retrying a start that did not answer,
    to show its error log: ``timeout 10 mysqld_safe --log-error="$(mktemp).err"``, i.e.
    the healthy command line but for the log. It lives 10 to 30 s after the durability
    restart of a server the agent left broken, and counted as an unofficial master it
    zeroed a partial repair (split_2 in CI). Ignoring it hides nothing that lasts or
    loosens: its options are the healthy server's, a server started that way does not
    survive the restarts, and a server that ran at the start must still run."""
    cmdline = master["cmdline"]
    return (
        name == "mariadbd"
        and master["exe"] == ARGV[name][0]
        and master["chain"][:2] == ["mysqld_safe", "timeout"]
        and _RETRY_LOG.search(cmdline) is not None
        and _ANY_LOG.sub(" --log-error=", cmdline) == _ANY_LOG.sub(" --log-error=", healthy_cmdline)
    )


def _look(probe: Probe, names: list[str]) -> tuple[Masters, dict[str, str]]:
    """Per daemon, each master process (its parent is not the same program) with its
    binary, command line and the names of its ancestors up to PID 1; and ``""``
    when its config test passes, else the test's first line of complaint."""
    in_host = not probe.root  # from an inspector, the tests run in the host (_tests_in_host)
    local = None if in_host else probe.process_table()
    if local is not None:  # from this machine
        table = {p.pid: (p.ppid, p.comm) for p in local}
        details = {p.pid: (p.exe, p.cmdline.strip()) for p in local if p.comm in names}
        # a process without an executable has let go of its memory: it is exiting (an init
        # script's `mariadbd --print-defaults` caught on its way out, its command line gone,
        # still running for a few ms under load), never a master; no living process can
        # shed its executable, so a daemon that blanks its command line is still judged
        alive = {p.pid for p in local if p.pid in details and p.exe and p.state != "Z"}
        # one read mid-exec has its new name and program but not yet its command line:
        # read again a moment later (a daemon that blanked its own is blank then too)
        blank = [pid for pid in alive if not details[pid][1]]
        if blank:
            time.sleep(AGAIN_SECONDS)
            again = {p.pid: p for p in probe.process_table() or []}
            for pid in blank:
                later = again.get(pid)
                if later is None or not later.exe or later.state == "Z":
                    alive.discard(pid)
                else:
                    details[pid] = (later.exe, later.cmdline.strip())
        return _masters_of(names, table, details, alive), tests_in_host(probe, names)
    tests = " ".join(_TEST.format(test=DAEMONS[n], name=n) for n in names) if in_host else ""
    out = probe.shell.run(f"{_PROCS.replace('__NAMES__', ' '.join(names))}; {tests} wait", timeout=30).output
    table = {}
    details = {}
    complaints = dict.fromkeys(names, "no answer from its test")
    alive: set[int] = set()
    for line in out.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "P":
            parts = rest.split(" ", 2)
            if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
                table[int(parts[0])] = (int(parts[1]), parts[2])
        elif kind == "M":
            pid, _, rest = rest.partition(" ")
            exe, _, cmdline = rest.partition("\t")
            if pid.isdigit():
                details[int(pid)] = (exe, cmdline.strip())
        elif kind == "L" and rest.strip().isdigit():
            alive.add(int(rest.strip()))
        elif kind == "T":
            head, _, first = rest.partition("\t")
            name, _, code = head.partition(" ")
            if name in complaints:
                complaints[name] = "" if code == "0" else (first.strip() or f"exit {code}")[:160]
    if not in_host:
        complaints = tests_in_host(probe, names)
    return _masters_of(names, table, details, alive), complaints


def _masters_of(
    names: list[str], table: dict[int, tuple[int, str]], details: dict[int, tuple[str, str]], alive: set[int]
) -> Masters:
    """Per daemon, each master (its parent is not the same program), from ``table`` (pid ->
    parent, name) and ``details`` (pid -> executable, command line) of its processes."""
    masters: Masters = {name: [] for name in names}
    for pid, (exe, cmdline) in sorted(details.items()):
        if pid not in alive:
            continue  # exited during the walk
        ppid, name = table.get(pid, (0, ""))
        if name not in masters or table.get(ppid, (0, ""))[1] == name or one_shot(name, exe, cmdline):
            continue
        chain, up = [], ppid
        while up > 0 and len(chain) < 16:
            parent, parent_name = table.get(up, (0, "?"))
            chain.append(parent_name)
            up = parent
        masters[name].append({"pid": pid, "exe": exe, "cmdline": cmdline, "chain": chain})
    return masters


def _unofficial(master: dict[str, Any], healthy: dict[str, Any]) -> str:
    """Why this master is not the one the init script starts ("" when it is)."""
    if master["exe"].endswith(" (deleted)") or master["exe"] != healthy["exe"]:
        return f"runs {master['exe'] or 'an unknown binary'}, not {healthy['exe']}"
    if master["cmdline"] != healthy["cmdline"]:
        return f"started as {master['cmdline']!r}, not {healthy['cmdline']!r}"
    if master["chain"] != healthy["chain"]:
        return f"started under {' < '.join(master['chain'])}, not {' < '.join(healthy['chain'])}"
    return ""


@CHECKS.register
class ServicesOfficial(Check):
    """nginx, php-fpm and MariaDB run as the init scripts start them: one master
    each, from the packaged binary, with the healthy host's command line (no
    private config, no --skip-grant-tables) under the same parents (mysqld_safe
    for mariadbd); the configuration on disk passes the daemon's own test; and
    a daemon that ran when the agent started still runs."""

    type = "services_official"

    class Params(CheckParams):
        daemons: list[str] = Field(default=list(DAEMONS), min_length=1)

    def _look(self, probe: Probe) -> tuple[Masters, dict[str, str]]:
        return _look(probe, [n for n in self.params.daemons if n in DAEMONS])

    def snapshot(self, probe: Probe) -> Any:
        masters, tests = self._look(probe)
        healthy = {}
        for name, found in masters.items():
            if len(found) != 1 or tests[name]:
                raise RuntimeError(
                    f"{name} on the healthy host: {len(found)} master(s), test {tests[name]!r}"
                )
            healthy[name] = {k: found[0][k] for k in ("exe", "cmdline", "chain")}
        return {"healthy": healthy, "must_run": sorted(healthy), "must_test": sorted(healthy)}

    def _masters(self, probe: Probe, healthy: dict[str, Any]) -> tuple[Masters, dict[str, str]]:
        """Each daemon's masters now, without MariaDB's init-script retry of a failed start."""
        masters, tests = self._look(probe)
        for name, found in masters.items():
            if name in healthy:
                masters[name] = [m for m in found if not init_retry(name, m, healthy[name]["cmdline"])]
        return masters, tests

    def refine(self, probe: Probe, baseline: Any) -> Any:
        healthy = baseline["healthy"]
        masters, tests = self._masters(probe, healthy)
        official = {
            n for n, found in masters.items() if len(found) == 1 and not _unofficial(found[0], healthy[n])
        }
        return {
            "healthy": healthy,
            "must_run": [n for n in baseline["must_run"] if n in official],
            "must_test": [n for n in baseline["must_test"] if not tests.get(n)],
        }

    def facts(self, facts: Facts, baseline: Any) -> bytes | None:
        # its processes, and what the daemons' config tests read (``config_tests``)
        read = facts.files(CONFIG_TREES, entries=(*CONFIG_NEIGHBOURS, *CONFIG_NAMES))
        return facts.processes() + read

    def evaluate(self, probe: Probe, baseline: Any) -> Outcome:
        masters, tests = self._masters(probe, baseline["healthy"])
        problems = []
        for name, healthy in baseline["healthy"].items():
            found = masters.get(name, [])
            if len(found) > 1:
                pids = ", ".join(str(m["pid"]) for m in found)
                problems.append(f"{name}: {len(found)} masters (PIDs {pids})")
            elif found and _unofficial(found[0], healthy):
                problems.append(f"{name} (PID {found[0]['pid']}) {_unofficial(found[0], healthy)}")
            elif not found and name in baseline["must_run"]:
                problems.append(f"{name} no longer runs")
            if name in baseline["must_test"] and tests.get(name):
                problems.append(f"{name}'s configuration fails its test: {tests[name]}")
        if problems:
            return Outcome(False, "; ".join(problems))
        return Outcome(True, f"{', '.join(baseline['healthy'])} as their init scripts run them")
