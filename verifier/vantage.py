"""Commands that look at a host from wherever the verifier stands: inside the
host itself (``root`` empty: the exported Harbor verifier, which by Harbor's
contract runs in the task's container), or from an inspector, a container
joining the host's PID and network namespaces with its own tools, that sees the
host's filesystem under ``/proc/1/root`` (``fixos.stack.inspector``).

Each command runs only the *looking* side's programs (bash, coreutils, gawk,
the mariadb client), never one of the host's, and reaches the host through
paths under ``root``.
"""

from __future__ import annotations

import shlex

INSPECTOR_ROOT = "/proc/1/root"
"""the host's filesystem seen from an inspector: its PID 1 is the host's init."""

MARIADB_SOCKET = "/run/mysqld/mysqld.sock"

# What the init scripts' `status` asks (a pid file naming a live daemon), answered
# with the looking side's tools: `service X status` would run the host's script and sh.
SERVICE_DAEMONS = {
    "nginx": ("/run/nginx.pid", "/usr/sbin/nginx"),
    "mariadb": ("/run/mysqld/mysqld.pid", "/usr/sbin/mariadbd"),
    "php8.2-fpm": ("/run/php/php8.2-fpm.pid", "/usr/sbin/php-fpm8.2"),
    "ssh": ("/run/sshd.pid", "/usr/sbin/sshd"),
}


def under(root: str, path: str) -> str:
    """``path`` on the host as seen from ``root`` (``/etc/x`` -> ``/proc/1/root/etc/x``)."""
    if not path.startswith("/"):
        raise ValueError(f"a host path must be absolute, got {path!r}")
    return root + path


def mariadb_command(query: str, root: str = "", *, connect_timeout: int | None = None) -> str:
    """A command running ``query`` as root on the host's MariaDB through its socket,
    with the looking side's client and no option file (``--no-defaults``: nothing
    the host holds is read). Root's ``unix_socket`` login works from an inspector
    because its uid 0 is the host's."""
    socket = shlex.quote(under(root, MARIADB_SOCKET))
    timeout = "" if connect_timeout is None else f" --connect-timeout={connect_timeout}"
    return f"mariadb --no-defaults --socket={socket}{timeout} -N -B -e {shlex.quote(query)}"


def service_running_command(service: str, root: str = "") -> str:
    """A command that exits 0 when the host's ``service`` runs: its pid file names a
    process of this PID namespace whose program is the service's daemon. A daemon
    whose binary was deleted reads ``… (deleted)``: not it."""
    if service not in SERVICE_DAEMONS:
        raise ValueError(f"no daemon known for service {service!r}; known: {', '.join(SERVICE_DAEMONS)}")
    pidfile, daemon = SERVICE_DAEMONS[service]
    return (
        f"p=; read -r p < {shlex.quote(under(root, pidfile))} 2>/dev/null; "
        f"[[ $p =~ ^[0-9]+$ ]] && [[ $(readlink /proc/$p/exe) == {shlex.quote(daemon)} ]]"
    )


def filesystem_use_command(path: str, metric: str = "space", root: str = "") -> str:
    """A command printing how full the host's filesystem holding ``path`` is, in percent,
    as the host's ``df`` (``--output=pcent``, or ``ipcent`` for ``inodes``) would print it.

    ``df`` itself cannot from an inspector: it looks ``path`` up in the inspector's
    mount table, where a host path is absent or (unprefixed) the inspector's own
    disk. ``statfs`` reads the filesystem the path is on, wherever it is mounted."""
    if metric not in ("space", "inodes"):
        raise ValueError(f"metric must be 'space' or 'inodes', got {metric!r}")
    fields = "%b %f %a" if metric == "space" else "%c %d %d"
    # df's rounding: used / (used + available to non-root), rounded up.
    return (
        f"stat -f -c '{fields}' {shlex.quote(under(root, path))} | "
        "awk '{ used = $1 - $2; all = used + $3; "
        'if (all == 0) print "-"; else printf "%d%%\\n", int((used * 100 + all - 1) / all) }\''
    )
