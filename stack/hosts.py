"""The live containers of one episode: create, wait until healthy, reach, remove.

Every object created carries ``fixos.run`` (the run id) and ``fixos.owner``
(this process), so ``fixos clean`` and the sweep of dead runs find leftovers.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import shlex
import tarfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, DockerException, NotFound

from ..core.errors import StackError
from ..core.models import CommandResult, HostHandle, HttpResponse
from ..scenarios.schema import HostSpec
from ..shells.base import Shell
from ..shells.exec import ExecShell
from ..shells.ssh import EpisodeKey, SshShell
from .boot_session import boot_command, first_session
from .boot_wait import boot_wait
from .disk_guard import DiskWatch, bounds_of, disk_mode, host_storage_opt, host_ulimits
from .facts import HostFacts
from .host_files import HostFiles, LocalView, local_view
from .names import container_name, owner_label
from .networks import EpisodeNetworks
from .overlay import overlay_changes
from .programs import run_program
from .roles import ROLE_PROBES, install_peer_key, role_environment
from .tls import EPISODE_VALIDITY, Validity
from .tls import install as install_tls
from .tunnel import Direct, handle_of, http_get, reach

LABEL_RUN = "fixos.run"
LABEL_OWNER = "fixos.owner"
LABEL_EPISODE = "fixos.episode"
PUBLISHED_PORTS = (80, 22, 443)
BOOT_TIMEOUT = 90.0
ARCHIVE_LIMIT = 8 * 2**20

# What each service leaves when its daemon is up: tested with bash builtins (no
# fork) while the host boots, so waiting costs the host nearly no CPU.
READY_HINTS = {
    "nginx": "-e /run/nginx.pid",
    "mariadb": "-S /run/mysqld/mysqld.sock",
    "php8.2-fpm": "-S /run/php/php8.2-fpm.sock",
    "ssh": "-e /run/sshd.pid",
}
READY_PROBES = {
    "nginx": "curl -fsS -o /dev/null --max-time 2 http://127.0.0.1/",
    "mariadb": "mariadb-admin --connect-timeout=2 ping",
    "php8.2-fpm": "test -S /run/php/php8.2-fpm.sock",
    "ssh": "ss -Hltn 'sport = :22' | grep -q .",
}


def host_tmpfs(spec: HostSpec) -> dict[str, str]:
    """/var/log is a filesystem of its own; /tmp too when the scenario sizes it."""
    log = {"/var/log": f"size={spec.log_disk_mb}m,nr_inodes={spec.log_disk_inodes},mode=0755"}
    return log if spec.tmp_disk_mb is None else {**log, "/tmp": f"size={spec.tmp_disk_mb}m,mode=1777"}


class LiveHost:
    """One booted container, reachable from the host machine."""

    def __init__(self, client: docker.DockerClient, handle: HostHandle, key: EpisodeKey, via=None) -> None:
        self._client = client
        self._reach = via or Direct()  # how this machine reaches its ports (fixos.stack.tunnel)
        self.handle = handle
        self.name = handle.name
        self.key = key
        """the episode's own SSH key: root logs in with it and nothing else."""
        self.boot_sessions: set[int] = set()  # PIDs of the open sessions forked in it (``.boot_session``)
        self._local: LocalView | None = None  # what this machine reads of it (``.host_files``), once asked

    def shell(self, **kwargs: Any) -> ExecShell:
        """A new, independent session with a clean environment (docker exec)."""
        return ExecShell(self._client.api, self.handle.container_id, **kwargs)

    def endpoint(self, port: int) -> tuple[str, int]:
        """(ip, port) this machine reaches ``port`` at: published or relayed (fixos.stack.tunnel)."""
        return self._reach.endpoint(self.handle, port)

    def ssh_shell(self, **kwargs: Any) -> SshShell:
        """A new, independent session over SSH through port 22's endpoint."""
        ip, port = self.endpoint(22)
        return SshShell(port, self.key, host=ip, **kwargs)

    def write_key(self, path: Path) -> Path:
        """The private key, for a user's own `ssh -i` (mode 600)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.chmod(0o600)  # before the key is in it: a file that was there keeps its mode
        path.write_text(self.key.private_text())
        return path

    def ssh_command(self, key_path: Path) -> str:
        ip, port = self.endpoint(22)  # a relay's listener lives as long as this process
        options = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"
        return f"ssh -i {key_path} -p {port} {options} root@{ip}"

    def exec_command(self) -> str:
        return f"docker exec -it {self.handle.container_id[:12]} bash -l"

    def http_get(self, port: int, path: str, timeout: float = 5.0) -> HttpResponse:
        if port not in self.handle.ports:
            return HttpResponse(0, b"", f"port {port} is not published")
        return http_get(self.endpoint(port), path, timeout)

    def changes(self) -> dict[str, str]:
        """Path -> ``A`` (added), ``C`` (changed) or ``D`` (deleted) against the image:
        the engine's ``docker diff``, which nothing inside the container can fake.
        A directory reads ``C`` whenever anything below it changed. Where the engine is this
        machine's, read from the container's upper directory (``fixos.stack.overlay``)."""
        layers = self.view().layers
        if layers is not None:
            walked = overlay_changes(layers)  # ~100 times cheaper, and stricter
            if walked is not None:
                return walked
        try:
            rows = self._client.api.diff(self.handle.container_id) or []
        except DockerException as exc:
            raise StackError(f"cannot list what changed on {self.name}: {exc}") from None
        return {row["Path"]: "CAD"[row["Kind"]] for row in rows}

    def run_program(
        self,
        argv: list[str],
        timeout: float = 20.0,
        *,
        stdout: bool = True,
        on_output: Callable[[bytes], None] | None = None,
    ) -> CommandResult:
        """One of the host's own programs run as root through the engine, no shell
        (``fixos.stack.programs``): for a daemon's test of its configuration."""
        api, container = self._client.api, self.handle.container_id
        return run_program(api, container, argv, timeout=timeout, stdout=stdout, on_output=on_output)

    def read_file(self, path: str) -> bytes | None:
        """The file's bytes read through the engine, not through any program in the container."""
        return self.read_files([path])[path]

    def forget_view(self) -> None:  # its root held open would keep a removed host's disk
        view, self._local = self._local, None
        if view is not None and view.files is not None:
            view.files.close()

    def view(self) -> LocalView:  # what this machine reads of it without the engine: its layers, its root
        if self._local is None:  # asked once: a container's layers and root never move
            self._local = local_view(self._client, self.handle.container_id)
        return self._local

    def facts(self) -> HostFacts | None:
        """Fingerprints of its state read from this machine (``fixos.stack.facts``); None elsewhere."""
        view = self.view()
        if view.layers is None or view.files is None:
            return None
        return HostFacts(view.files.pid, view.layers.upper, view.files.root_fd)

    def local_files(self) -> HostFiles | None:
        """Its root, held open from this machine where the engine is local; None elsewhere."""
        return self.view().files

    @property
    def reads_locally(self) -> bool:
        """Whether ``read_files`` reads inside the host's root from here (its /proc too)."""
        return self.view().files is not None

    def read_files(self, paths: list[str]) -> dict[str, bytes | None]:
        """Several files, read inside the host's root from this machine where it is the
        engine's (``fixos.stack.host_files``), else through the engine, one archive per
        config directory (an archive costs ~40 ms whatever its size)."""
        files = self.view().files
        if files is not None:
            return {path: files.read(path, ARCHIVE_LIMIT) for path in paths}
        found: dict[str, bytes | None] = dict.fromkeys(paths)
        groups: dict[str, list[str]] = {}
        for path in paths:
            groups.setdefault("/".join(path.split("/")[:3]), []).append(path)
        tops = [
            (os.path.commonpath([os.path.dirname(p) for p in group]) if len(group) > 1 else group[0], group)
            for group in groups.values()
        ]
        if len(tops) == 1:
            found.update(self._from_archive(*tops[0]))
            return found
        with ThreadPoolExecutor(max_workers=len(tops)) as readers:  # the engine answers them at once
            for part in readers.map(lambda top: self._from_archive(*top), tops):
                found.update(part)
        return found

    def _from_archive(self, top: str, wanted: list[str]) -> dict[str, bytes | None]:
        """``wanted`` files out of the archive of ``top`` (a file or a directory above them)."""
        try:
            stream, _ = self._client.api.get_archive(self.handle.container_id, top)
        except NotFound:
            return {path: None for path in wanted} if len(wanted) == 1 else self._one_by_one(wanted)
        data = bytearray()
        for chunk in stream:
            data += chunk
            if len(data) > ARCHIVE_LIMIT:  # someone filled the directory: fetch only the files
                return self._one_by_one(wanted) if len(wanted) > 1 else {top: None}
        prefix = os.path.basename(top)
        names = {prefix + path[len(top) :]: path for path in wanted}
        out: dict[str, bytes | None] = {}
        with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
            for member in tar:
                path = names.get(member.name)
                if path is not None and member.isfile():
                    extracted = tar.extractfile(member)
                    out[path] = extracted.read() if extracted else None
        return out

    def _one_by_one(self, wanted: list[str]) -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = {}
        for path in wanted:
            out.update(self._from_archive(path, [path]))
        return out


class Stack:
    """Owns the containers and the network of one episode."""

    def __init__(
        self,
        client: docker.DockerClient,
        *,
        run_id: str,
        episode_id: str,
        hosts: list[HostSpec],
        images: dict[str, str],
        tls_validity: Validity = EPISODE_VALIDITY,
        networks: EpisodeNetworks | None = None,
    ) -> None:
        self._client = client
        self._networks = networks or EpisodeNetworks(client, keep=False)
        self._tls_validity = tls_validity
        self.run_id = run_id
        self.episode_id = episode_id
        self._specs = hosts
        self._images = images
        self._labels = {
            LABEL_RUN: run_id,
            LABEL_OWNER: owner_label(),
            LABEL_EPISODE: episode_id,
        }
        self._containers: list[Any] = []
        self._boot_shells: dict[str, Shell] = {}
        self._network: Any = None
        self._reach: Any = Direct()
        self.disk_watch: DiskWatch | None = None
        self._key = EpisodeKey()
        self.hosts: dict[str, LiveHost] = {}

    def up(self) -> None:
        try:
            self._network = self._networks.take(f"fixos-{self.episode_id}", self._labels)
            self._reach = reach(self._client, self._network, self._labels, self._images)
            for spec in self._specs:
                self.hosts[spec.name] = self._start(spec)
            if disk_mode(self._client, self._images[self._specs[0].image], self._labels) == "watch":
                bounds = bounds_of(self._containers, [s.disk_mb for s in self._specs])
                self.disk_watch = DiskWatch(self._client, bounds).start()
        except DockerException as exc:
            raise StackError(f"cannot start the hosts of {self.episode_id}: {exc}") from None
        for spec in self._specs:
            self._wait_ready(spec)
            shell = self._boot_shells[spec.name]
            install_tls(self.hosts[spec.name], spec.services, shell, self._tls_validity)

    def _start(self, spec: HostSpec) -> LiveHost:
        disk = disk_mode(self._client, self._images[spec.image], self._labels)
        container = self._client.containers.run(
            self._images[spec.image],
            detach=True,
            name=container_name(self.episode_id, spec.name),
            hostname=spec.name,
            labels=self._labels,
            network=self._network.name,
            ports={f"{p}/tcp": ("127.0.0.1", None) for p in PUBLISHED_PORTS}
            if self._reach.publishes
            else None,
            mem_limit=f"{spec.memory_mb}m",
            memswap_limit=f"{spec.memory_mb}m",
            nano_cpus=int(spec.cpus * 1e9),
            pids_limit=spec.pids,
            storage_opt=host_storage_opt(disk, spec.disk_mb),
            ulimits=host_ulimits(disk, spec.disk_mb),
            tmpfs=host_tmpfs(spec),
            environment=role_environment(spec, self._specs),
            # Peers reach each other by host name on the episode's network (aliases survive
            # the rename of a warm stack, which container names do not).
            networking_config={
                self._network.name: self._client.api.create_endpoint_config(aliases=[spec.name])
            },
            cap_add=list(spec.caps) or None,
            command=boot_command(isinstance(self._reach, Direct)),  # a local engine: no exec for the harness
            # No SYS_PTRACE: with it root here could write into an inspector (/proc/PID/mem).
            # The cost: `ss -p`, `lsof`, /proc/PID/exe name no owner of a setuid daemon's sockets.
        )
        self._containers.append(container)
        container.reload()
        handle = handle_of(self._reach, spec.name, container.attrs, self._network.name, PUBLISHED_PORTS)
        return LiveHost(self._client, handle, self._key, self._reach)

    def _wait_ready(self, spec: HostSpec) -> None:
        host = self.hosts[spec.name]
        probes = [READY_PROBES[s] for s in spec.services if s in READY_PROBES]
        if spec.role in ROLE_PROBES:
            probes.append(ROLE_PROBES[spec.role].format(name=shlex.quote(spec.name)))
        command = " && ".join(probes) or "true"
        deadline = time.monotonic() + BOOT_TIMEOUT
        hints = " && ".join(f"[ {READY_HINTS[s]} ]" for s in spec.services if s in READY_HINTS) or "true"
        # The session that waits for the boot stays open: the episode's harness
        # adopts it (``take_shells``) instead of starting one of its own.
        listens = boot_command(isinstance(self._reach, Direct)) is not None
        shell = self._boot_shells[spec.name] = first_session(host, self._client.api, listens)
        authorized = shlex.quote(self._key.public_line(f"fixos-{self.episode_id}"))
        shell.run(f"printf '%s\\n' {authorized} > /root/.ssh/authorized_keys", timeout=10)
        if len(self._specs) > 1:
            install_peer_key(shell, self._key)
        shell.run(boot_wait(hints, BOOT_TIMEOUT, "mariadb" in spec.services), timeout=BOOT_TIMEOUT + 5)
        while True:
            result = shell.run(command, timeout=10)
            if result.ok:
                return
            if time.monotonic() > deadline:
                raise StackError(
                    f"host {spec.name} of {self.episode_id} not ready after "
                    f"{BOOT_TIMEOUT:g}s: {result.output.strip()[-200:]}"
                )
            time.sleep(0.05)

    def claim(self, episode_id: str) -> None:
        """Hand a warm stack to an episode: its containers take the episode's name (labels
        cannot change after creation, so ``fixos.episode`` keeps the warm name; ``fixos.run``
        and ``fixos.owner`` are what cleaning relies on)."""
        try:
            for container, spec in zip(self._containers, self._specs, strict=True):
                name = container_name(episode_id, spec.name)
                try:
                    container.rename(name)
                except APIError as exc:  # a retry's first attempt, still being removed: its name goes
                    if exc.status_code != 409:
                        raise
                    with contextlib.suppress(NotFound):
                        self._client.api.rename(name, f"{name}-gone-{secrets.token_hex(3)}")
                    container.rename(name)
        except DockerException as exc:
            raise StackError(f"cannot hand warm hosts to {episode_id}: {exc}") from None
        self.episode_id = episode_id

    @property
    def specs(self) -> list[HostSpec]:
        return self._specs

    def image_ids(self) -> dict[str, str]:
        return {c.attrs["Config"]["Image"]: c.attrs["Image"] for c in self._containers}

    def take_shells(self) -> dict[str, Shell]:
        """The sessions that waited for each host's boot (clean environment, never an
        agent's), handed over once; the taker closes them."""
        shells, self._boot_shells = self._boot_shells, {}
        return shells

    def down(self) -> None:
        """Remove everything this stack created; safe to call twice."""
        if self.disk_watch is not None:
            self.disk_watch.stop()
        for shell in self.take_shells().values():
            with contextlib.suppress(Exception):
                shell.close()
        for host in self.hosts.values():
            host.forget_view()
        for container in self._containers:
            with contextlib.suppress(NotFound):
                container.remove(force=True, v=True)
        self._containers.clear()
        self._reach.close()
        if self._network is not None:
            self._networks.give(self._network)
            self._network = None

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()
