"""The network between the shop's hosts broken as operators break it: a firewall
that drops the database port, MariaDB listening on loopback only, the app looking
for its database at the wrong address, a link shaped to a trickle.

They live on multi-host stacks (``role: web|app|db``): the faults that touch the
network stack itself (``firewall_blocks``, ``link_throttled``) need ``caps:
[NET_ADMIN]`` on their host, and refuse to inject without it. Every inject returns
``undo``: a shell script that, run on the fault's host, repairs exactly what it
broke (a scenario's oracle runs it there over ``ssh``).

No packet leaves the machine: the wrong addresses are loopback ones or an unused
address of the episode's own bridge network, and the dead resolver is 127.0.0.53.
Measured on this kernel (NOTES.md): no ``sch_netem``, so no delay or loss qdisc;
an MTU mismatch on a veth bridge gives TCP no symptom (each side's MSS follows its
own MTU), so there is no ``mtu_mismatch`` fault.
"""

from __future__ import annotations

import ipaddress
import random
import re
import shlex
from collections.abc import Mapping
from typing import Any, Literal

from ..core.errors import InvalidEpisode
from ..core.models import Outcome
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams
from .conflicts import OWN, UP, Claim

DB_PORT = 3306
CAP_NET_ADMIN = 12
APP_INI = "/etc/shop/app.ini"
CHAINS = ["db-guard", "HARDENING", "fw-input"]
BIND_FILES = [
    "/etc/mysql/mariadb.conf.d/60-fixos.cnf",
    "/etc/mysql/mariadb.conf.d/99-hardening.cnf",
    "/etc/mysql/mariadb.conf.d/90-security.cnf",
]
"""files read after 50-server.cnf and the role's bind-address = 0.0.0.0 (my.cnf reads conf.d/
*before* mariadb.conf.d/, so a line there would be overridden and break nothing)."""


def _run(shell: Shell, command: str, what: str, timeout: float = 30) -> str:
    result = shell.run(command, timeout=timeout)
    if result.exit_code != 0:
        raise RuntimeError(f"cannot {what}: {result.output.strip()[-300:]}")
    return result.output


def require_net_admin(shell: Shell, fault_type: str) -> None:
    """Refuse clearly on a host the scenario did not give ``caps: [NET_ADMIN]``."""
    caps = shell.run("awk '/^CapEff/ {print $2}' /proc/1/status", timeout=10).output.strip()
    try:
        granted = int(caps, 16) >> CAP_NET_ADMIN & 1
    except ValueError:
        granted = 0
    if not granted:
        raise InvalidEpisode(f"{fault_type} needs NET_ADMIN on its host: `caps: [NET_ADMIN]` in the scenario")


def episode_subnet(shell: Shell) -> ipaddress.IPv4Network:
    """The episode network eth0 is on (its address and prefix, as ``ip`` shows them)."""
    out = _run(shell, "ip -4 -o addr show dev eth0", "read eth0's address")
    found = re.search(r"inet (\d+\.\d+\.\d+\.\d+/\d+)", out)
    if not found:
        raise RuntimeError(f"eth0 has no IPv4 address: {out.strip()}")
    return ipaddress.ip_interface(found.group(1)).network


SUBNET_SH = "\"$(ip -4 -o route show dev eth0 scope link | awk 'NR == 1 {print $1}')\""
"""The episode network, as the host itself reads it when the command runs: an exported
task replays the command on a network of Harbor's, whose addresses are not the episode's."""


def unused_address(shell: Shell, rng: random.Random) -> str:
    """An address of the episode's own bridge that no host answers on (not in the
    neighbour table and no ARP reply): connections to it fail with no route to host."""
    net = episode_subnet(shell)
    hosts = list(net.hosts())
    for _ in range(20):
        candidate = str(hosts[-rng.randint(2, min(60, len(hosts) - 1))])
        probe = f"! ip neigh show {candidate} | grep -q lladdr && ! ping -c1 -W1 {candidate} >/dev/null 2>&1"
        if shell.run(probe, timeout=10).exit_code == 0:
            return candidate
    raise RuntimeError(f"no unused address found in {net}")


def db_host_name(shell: Shell) -> str:
    """The database host the app is pointed at (``host =`` of app.ini)."""
    out = _run(shell, f"sed -n 's/^host = //p' {APP_INI}", "read app.ini")
    return out.strip().splitlines()[0] if out.strip() else "db"


class _Undoes:
    """Shared by the faults below (a mixin, not a Fault: every Fault class is a registered
    type): each inject records ``undo``, the shell that repairs exactly what it broke, and
    that is its reference repair."""

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.seeded: dict[str, Any] = {}
        """what inject drew and did, ``undo`` among it"""

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The fault's own undo, as it recorded it (``undo``)."""
        return str(seeded["undo"])  # shell the fault wrote itself


@FAULTS.register
class FirewallBlocks(_Undoes, Fault):
    """The db host's firewall: a baseline an operator would keep (INPUT policy DROP;
    loopback, replies, ICMP, ssh and the database port from the episode network
    accepted), plus one rule that drops or rejects the database port ahead of it.
    Seeded: DROP or REJECT, the rule in INPUT or in a custom chain INPUT jumps to,
    and iptables (nf_tables) or iptables-legacy for that rule (``iptables -S`` then
    shows nothing of it, only a warning that legacy tables exist)."""

    type = "firewall_blocks"
    records = ("action", "chain", "tool", "subnet", "undo")

    @classmethod
    def claims(cls, params: FaultParams) -> list[Claim]:
        return [Claim("firewall:INPUT", OWN, "sets the host's INPUT firewall")]

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        require_net_admin(shell, self.type)
        subnet = episode_subnet(shell)
        action = rng.choice(["DROP", "REJECT"])
        chain = rng.choice(["INPUT", *CHAINS])
        tool = rng.choice(["iptables", "iptables-legacy"])
        target = "DROP" if action == "DROP" else "REJECT --reject-with tcp-reset"
        baseline = " && ".join(
            [
                "iptables -A INPUT -i lo -j ACCEPT",
                "iptables -A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
                "iptables -A INPUT -p icmp -j ACCEPT",
                "iptables -A INPUT -p tcp --dport 22 -j ACCEPT",
                f"iptables -A INPUT -s {SUBNET_SH} -p tcp --dport {DB_PORT} -j ACCEPT",
                "iptables -P INPUT DROP",
            ]
        )
        rule = f"-p tcp --dport {DB_PORT} -j {target}"
        if chain == "INPUT":
            block = f"{tool} -I INPUT 1 {rule}"
            undo = f"{tool} -D INPUT {rule}"
        else:
            block = f"{tool} -N {chain} && {tool} -A {chain} {rule} && {tool} -I INPUT 1 -j {chain}"
            undo = f"{tool} -D INPUT -j {chain} && {tool} -F {chain} && {tool} -X {chain}"
        _run(shell, f"{baseline} && {block}", "set up the firewall")
        self.seeded = {"action": action, "chain": chain, "tool": tool, "subnet": str(subnet), "undo": undo}
        return self.seeded

    def confirm(self, shell: Shell) -> Outcome:
        tool, chain = self.seeded.get("tool", "iptables"), self.seeded.get("chain", "INPUT")
        rules = shell.run(f"{tool} -S {shlex.quote(chain)} 2>/dev/null", timeout=10).output
        blocks = re.compile(rf"--dport {DB_PORT} .*-j (DROP|REJECT)")
        blocking = [r for r in rules.splitlines() if blocks.search(r)]
        jumped = chain == "INPUT" or f"-j {chain}" in shell.run(f"{tool} -S INPUT", timeout=10).output
        shown = "; ".join(blocking) or "no rule on 3306"
        return Outcome(bool(blocking) and jumped, f"{tool} {chain}: {shown}")

    def revert(self, shell: Shell) -> None:
        shell.run(self.seeded["undo"], timeout=10)
        shell.run("iptables -P INPUT ACCEPT && iptables -F INPUT", timeout=10)


@FAULTS.register
class DbBindLocal(_Undoes, Fault):
    """MariaDB on the db host listens on 127.0.0.1 only (or, seeded, not on TCP at
    all: ``skip-networking``), from a line in a seeded option file: the role's own
    60-fixos.cnf edited, or a later "hardening" file overriding it."""

    type = "db_bind_local"
    records = ("file", "line", "undo")

    @classmethod
    def claims(cls, params: FaultParams) -> list[Claim]:
        return [
            Claim("service:mariadb", UP, "restarts MariaDB on loopback and shows it listening there"),
            Claim("mariadb:bind", OWN, "sets where MariaDB listens"),
        ]

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        path = rng.choice(BIND_FILES)
        line = rng.choice(["bind-address = 127.0.0.1", "bind-address = 127.0.0.1", "skip-networking"])
        q = shlex.quote(path)
        if path == BIND_FILES[0]:
            undo_line = "bind-address = 0.0.0.0"
            if line == "skip-networking":
                edit = f"printf '%s\\n' {shlex.quote(line)} >> {q}"
                undo = f"sed -i '/^skip-networking/d' {q}"
            else:
                edit = f"sed -i 's/^bind-address = .*/{line}/' {q}"
                undo = f"sed -i 's/^bind-address = .*/{undo_line}/' {q}"
        else:
            edit = f"mkdir -p $(dirname {q}) && printf '[mysqld]\\n%s\\n' {shlex.quote(line)} > {q}"
            undo = f"rm -f {q}"
        _run(shell, f"{edit} && service mariadb restart", "rebind MariaDB", timeout=90)
        self.seeded = {"file": path, "line": line, "undo": f"{undo} && service mariadb restart"}
        return self.seeded

    def confirm(self, shell: Shell) -> Outcome:
        listening = shell.run(f"ss -Hltn 'sport = :{DB_PORT}'", timeout=10).output.split()
        local = [w for w in listening if w.endswith(f":{DB_PORT}")]
        running = shell.run("pidof mariadbd", timeout=10).exit_code == 0
        bound_local = running and all(w.startswith(("127.", "[::1]")) for w in local)
        state = "runs" if running else "not running"
        return Outcome(bound_local, f"mariadbd {state}, 3306 on: {local or 'nothing'}")

    def revert(self, shell: Shell) -> None:
        shell.run(self.seeded["undo"], timeout=90)


@FAULTS.register
class DbHostWrong(_Undoes, Fault):
    """The app host looks for its database where it is not: a stale ``/etc/hosts``
    entry for the db host's name (an unused address of the bridge), ``host =`` in
    app.ini set to ``localhost`` (no MariaDB there) or an old address, or
    resolv.conf naming a resolver that does not run (127.0.0.53)."""

    type = "db_host_wrong"
    records = ("variant", "name", "wrong", "undo")

    class Params(FaultParams):
        variants: list[Literal["hosts", "app_ini", "resolv"]] = ["hosts", "app_ini", "resolv"]
        """the ways it may draw from (a scenario may narrow them)"""

    @classmethod
    def claims(cls, params: FaultParams) -> list[Claim]:
        return [Claim("link:app_db", OWN, "points the app at a wrong database address")]

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.name = "db"

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        self.name = name = db_host_name(shell)
        variant = rng.choice(self.params.variants)
        backup = "/root/.fixos-resolv.conf"  # the undo's copy
        if variant == "hosts":
            wrong = unused_address(shell, rng)
            edit = f"printf '%s\\t%s\\n' {wrong} {shlex.quote(name)} >> /etc/hosts"
            # in place: /etc/hosts is a file the engine mounted, `sed -i` cannot rename over it
            copy = "/root/.fixos-hosts"
            line = re.escape(wrong)
            undo = f"sed '/^{line}\\s/d' /etc/hosts > {copy} && cat {copy} > /etc/hosts && rm -f {copy}"
        elif variant == "app_ini":
            wrong = rng.choice(["localhost", unused_address(shell, rng)])
            edit = f"sed -i 's/^host = .*/host = {wrong}/' {APP_INI}"
            undo = f"sed -i 's/^host = .*/host = {name}/' {APP_INI}"
        else:
            wrong = "127.0.0.53"
            # Written in place: /etc/resolv.conf is a file the engine mounted, not replaceable.
            edit = f"cat /etc/resolv.conf > {backup} && printf 'nameserver {wrong}\\n' > /etc/resolv.conf"
            undo = f"cat {backup} > /etc/resolv.conf && rm -f {backup}"
        _run(shell, edit, "point the app elsewhere")
        self.seeded = {"variant": variant, "name": name, "wrong": wrong, "undo": undo}
        return self.seeded

    def confirm(self, shell: Shell) -> Outcome:
        configured = db_host_name(shell)
        lookup = f"getent ahostsv4 {shlex.quote(configured)} | head -n1"
        resolved = shell.run(lookup, timeout=10).output.split()
        address = resolved[0] if resolved else "nothing"
        wrong = self.seeded.get("wrong", "")
        broken = configured != self.name or address == wrong or not resolved
        return Outcome(broken, f"app.ini host = {configured}, which resolves on the app host to {address}")

    def revert(self, shell: Shell) -> None:
        shell.run(self.seeded["undo"], timeout=10)


@FAULTS.register
class LinkThrottled(_Undoes, Fault):
    """A bandwidth cap on the database's traffic left on the host's eth0 (a QoS test
    someone forgot): an htb class of a few hundred bits a second that u32 filters send
    MariaDB's port to, both ways, the rest of the traffic unshaped (so ARP and ssh
    still work: a plain tbf on the whole link starved ARP and the host fell off the
    bridge). A page that asks the database waits longer than anyone will. Seeded: the rate."""

    type = "link_throttled"
    records = ("rate_bits", "undo")

    @classmethod
    def claims(cls, params: FaultParams) -> list[Claim]:
        return [Claim("qdisc:eth0", OWN, "shapes eth0")]

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        require_net_admin(shell, self.type)
        rate = rng.choice([800, 1000, 1200])
        dev = "dev eth0 parent 1:"
        match = f"{dev} protocol ip prio 1 u32 match ip"
        shaping = " && ".join(
            [
                "tc qdisc add dev eth0 root handle 1: htb default 10 r2q 1",
                f"tc class add {dev} classid 1:10 htb rate 1000mbit quantum 60000",
                f"tc class add {dev} classid 1:30 htb rate {rate}bit ceil {rate}bit burst 100 cburst 100",
                f"tc filter add {match} sport {DB_PORT} 0xffff flowid 1:30",
                f"tc filter add {match} dport {DB_PORT} 0xffff flowid 1:30",
            ]
        )
        # htb warns about quanta it picks itself: noise, not an error
        quiet = f"({shaping}) 2>&1 | grep -v '^Warning: sch_htb'; tc class show dev eth0 | grep -q 1:30"
        _run(shell, quiet, "shape eth0")
        self.seeded = {"rate_bits": rate, "undo": "tc qdisc del dev eth0 root"}
        return self.seeded

    def confirm(self, shell: Shell) -> Outcome:
        shown = shell.run("tc qdisc show dev eth0; tc class show dev eth0", timeout=10).output.strip()
        capped = " htb " in f" {shown}" and "class htb 1:30" in shown
        return Outcome(capped, f"eth0: {shown.replace(chr(10), '; ')}")

    def revert(self, shell: Shell) -> None:
        shell.run(self.seeded["undo"], timeout=10)
