"""Target-host images: built from images/<name>/, tagged by a hash of their inputs.

An image is rebuilt only when a file under its directory or its base image
changes. The base is ``debian:bookworm-slim`` where a registry serves it;
otherwise a Debian root filesystem is bootstrapped offline and imported.
What debootstrap and the builds print goes to the set-up log (``setup_log``).
The images are ``fixos/<name>:<hash>``; ``FIXOS_IMAGE_NAMESPACE`` builds them
under another name (``scratch/<name>:<hash>``) beside the real ones, for a fresh
set-up that leaves those alone (tests/test_setup_log.py). The base is shared.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

import docker
from docker.errors import APIError, DockerException, ImageNotFound

from ..core.errors import EngineError
from .setup_log import SetupLog
from .sources import debian_mirror

# Build contexts ship as the package data of fixos.images; FIXOS_IMAGES_DIR points elsewhere.
IMAGES_DIR = Path(os.environ.get("FIXOS_IMAGES_DIR") or Path(__file__).resolve().parent.parent / "images")
RELEASE = "bookworm"
REGISTRY_BASE = f"debian:{RELEASE}-slim"
# "-r2": the first offline bases were imported with a root directory of mode 700
# (mkdtemp's), which overlay2 ignores but btrfs keeps, so no daemon user could
# reach any file; a new tag keeps engines from reusing one of those.
OFFLINE_BASE = f"fixos/base:{RELEASE}-r2"
NAMESPACE_ENV = "FIXOS_IMAGE_NAMESPACE"
_NAMESPACE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")

Say = Callable[[str], None]


def namespace() -> str:
    """Where FixOS's images are tagged: ``fixos``, or ``FIXOS_IMAGE_NAMESPACE``."""
    found = os.environ.get(NAMESPACE_ENV) or "fixos"
    if not _NAMESPACE.match(found):
        raise EngineError(
            f"{NAMESPACE_ENV}={found!r} is not an image name: lower-case letters and digits, "
            "joined by single '.', '_' or '-'"
        )
    return found


def _exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except ImageNotFound:
        return False
    return True


def _bootstrap_base(client: docker.DockerClient, say: Say, log: SetupLog) -> None:
    if shutil.which("debootstrap") is None:
        raise EngineError(
            f"no registry serves {REGISTRY_BASE} and debootstrap is missing; "
            "install it (apt-get install debootstrap) or set FIXOS_BASE_IMAGE"
        )
    mirror = debian_mirror(RELEASE)
    where = f" from {mirror}" if mirror else ""
    say(f"base image: no registry answers; debootstrapping {RELEASE}{where} into {OFFLINE_BASE} (~30 s)")
    root = Path(tempfile.mkdtemp(prefix="fixos-rootfs-"))
    root.chmod(0o755)  # the image's "/" takes this mode (mkdtemp's is 700)
    command = ["debootstrap", "--variant=minbase", RELEASE, str(root), *([mirror] if mirror else [])]
    try:
        with log.step("base image", " ".join(command)) as out:
            run = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if run.returncode != 0:
                raise log.failed("base image", f"debootstrap exited {run.returncode}")
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        try:
            client.api.import_image_from_stream(tar.stdout, repository=OFFLINE_BASE)
        finally:
            tar.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def ensure_base(client: docker.DockerClient, say: Say, log: SetupLog | None = None) -> str:
    """The tag of a Debian bookworm base image present on this engine."""
    wanted = os.environ.get("FIXOS_BASE_IMAGE")
    if wanted:
        if not _exists(client, wanted):
            say(f"base image: pulling {wanted}")
            try:
                client.images.pull(wanted)
            except DockerException as exc:
                raise EngineError(f"FIXOS_BASE_IMAGE={wanted} cannot be pulled: {exc}") from None
        return wanted
    for tag in (REGISTRY_BASE, OFFLINE_BASE):
        if _exists(client, tag):
            return tag
    try:
        say(f"base image: trying to pull {REGISTRY_BASE}")
        client.images.pull(REGISTRY_BASE)
        return REGISTRY_BASE
    except DockerException:
        _bootstrap_base(client, say, log or SetupLog())
        return OFFLINE_BASE


def _inputs(directory: Path) -> Iterator[tuple[str, int, Path]]:
    """Each file of a build context: its path inside, its mode, where it is.

    Only the exec bit counts (mode 755 or 644): a checkout or a wheel install sets the
    other bits from the umask, and the same files must give the same image wherever
    FixOS is installed."""
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        mode = 0o755 if path.stat().st_mode & 0o100 else 0o644
        yield path.relative_to(directory).as_posix(), mode, path


def content_hash(directory: Path, base_id: str) -> str:
    """The image's inputs: its base, and each file's path, mode and content."""
    digest = hashlib.sha256(base_id.encode())
    for rel, mode, path in _inputs(directory):
        digest.update(f"\0{rel}\0{mode:o}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def build_context(directory: Path) -> io.BytesIO:
    """The build context as a tar of exactly what content_hash covers, modes included,
    so an image's tag says what is in it (folders 755)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        folders: set[str] = set()
        for rel, mode, path in _inputs(directory):
            for folder in reversed(PurePosixPath(rel).parents[:-1]):
                if folder.as_posix() not in folders:
                    folders.add(folder.as_posix())
                    entry = tarfile.TarInfo(folder.as_posix())
                    entry.type, entry.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(entry)
            data = path.read_bytes()
            entry = tarfile.TarInfo(rel)
            entry.size, entry.mode = len(data), mode
            tar.addfile(entry, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def image_tag(client: docker.DockerClient, name: str, base: str) -> str:
    base_id = client.images.get(base).id
    return f"{namespace()}/{name}:{content_hash(IMAGES_DIR / name, base_id)}"


def ensure_image(client: docker.DockerClient, name: str, say: Say, log: SetupLog | None = None) -> str:
    """Build images/<name> unless an image with the same inputs exists; return its tag.
    The build's own output goes to the set-up log; a failed build raises SetupFailed."""
    directory = IMAGES_DIR / name
    if not (directory / "Dockerfile").is_file():
        raise EngineError(f"no image named {name!r}: {directory}/Dockerfile does not exist")
    log = log or SetupLog()
    base = ensure_base(client, say, log)
    tag = image_tag(client, name, base)
    if _exists(client, tag):
        return tag
    say(f"image {name}: building {tag} from {base} (about 2 minutes the first time; output in {log.path})")
    step = f"image {name}"
    with log.step(step, f"docker build -t {tag} --build-arg BASE={base} {directory}") as out:
        try:
            for chunk in client.api.build(
                fileobj=build_context(directory),
                custom_context=True,
                tag=tag,
                buildargs={"BASE": base},
                rm=True,
                forcerm=True,
                decode=True,
                labels={"fixos.image": name},
            ):
                out.write(chunk.get("stream", "") or (f"{chunk['status']}\n" if "status" in chunk else ""))
                if "error" in chunk:
                    out.write(f"{chunk['error'].rstrip()}\n")
                    raise log.failed(step, chunk["error"].strip().splitlines()[-1])
        except APIError as exc:
            out.write(f"{exc}\n")
            raise log.failed(step, f"the engine refused the build: {exc.explanation}") from None
    client.images.get(tag).tag(f"{namespace()}/{name}", "latest")
    return tag


def replicate(
    source: docker.DockerClient,
    target: docker.DockerClient,
    tag: str,
    say: Say,
    where: str = "another engine",
) -> str:
    """Copy an image built on one engine to another (a save/load stream, far cheaper
    than a second debootstrap and build); the tag and image id stay the same."""
    if _exists(target, tag):
        return tag
    say(f"image {tag}: copying to {where} (once; ~30 s)")
    try:
        target.images.load(source.images.get(tag).save(named=True))
    except DockerException as exc:
        raise EngineError(f"cannot copy {tag} to {where}: {exc}") from None
    return tag
