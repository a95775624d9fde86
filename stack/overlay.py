"""What a host changed against its image, read from its overlay2 upper directory.

``docker diff`` is the engine's answer to "what did the container change", and the
programs gate asks it at every judgement. On overlay2 the engine gets its answer
by walking the container's upper directory, but the API call costs about a second
here (52 rows, 1.2 s); walking that same directory takes 7 ms. So where the
engine is this machine's, FixOS walks the upper directory itself. Like the
engine, it walks from outside the container: nothing inside can fake what the
upper directory holds (and no host has CAP_SYS_ADMIN, so nothing in one can
mount over a program either).

It is used only when the container's own mounts name that upper directory
(``/proc/<pid>/mountinfo`` of the container's init, read on this machine). That
proves the engine and this process share a kernel and a filesystem. Everywhere
else (a remote engine, another storage driver) the engine's diff is used. A renamed
directory (an overlay ``redirect``) is left to the engine's diff too.

Kinds are the engine's: ``A`` added, ``C`` changed, ``D`` deleted. Every entry
copied up counts. The engine leaves out an entry whose size, mode and time equal
the image's. So a program patched in place to the same size, with its time set
back, is missing from the engine's diff, and reads ``C`` here
(``tests/test_overlay.py``). A directory replaced as a whole (overlay's
``opaque``) reads ``C``, and each entry the image had below it that the upper
directory does not hold reads ``D``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any

_OPAQUE = "trusted.overlay.opaque"
_REDIRECT = "trusted.overlay.redirect"


@dataclass(frozen=True)
class Layers:
    """A container's overlay2 directories on this machine."""

    upper: str
    lowers: tuple[str, ...]
    """the image's layers, the topmost first (the engine's ``LowerDir`` order)."""


def local_layers(inspect: dict[str, Any]) -> Layers | None:
    """The container's layers, when they are this machine's and its init mounted them;
    ``inspect``: the engine's description of the container (``inspect_container``)."""
    driver = inspect.get("GraphDriver") or {}
    if driver.get("Name") != "overlay2":
        return None
    data = driver.get("Data") or {}
    upper, lower = data.get("UpperDir") or "", data.get("LowerDir") or ""
    pid = (inspect.get("State") or {}).get("Pid") or 0
    if not upper or not lower or pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/mountinfo", encoding="utf-8", errors="replace") as f:
            mounts = f.read()
    except OSError:
        return None
    mounted = any(f"upperdir={upper}{end}" in mounts for end in (",", " ", "\n"))
    if not mounted or not os.path.isdir(upper):
        return None
    return Layers(upper, tuple(p for p in lower.split(":") if p))


def image_path(layers: Layers, rel: str) -> str | None:
    """Where on this machine the image's own ``rel`` lies (its topmost layer that holds it);
    None when the image has none."""
    for lower in layers.lowers:
        try:
            st = os.lstat(lower + rel)
        except OSError:
            continue
        # a whiteout in a higher layer of the image hides what lies below it
        return None if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0 else lower + rel
    return None


def _in_image(layers: Layers, rel: str) -> bool:
    return image_path(layers, rel) is not None


def _xattr(path: str, name: str) -> bytes | None:
    try:
        return os.getxattr(path, name, follow_symlinks=False)
    except OSError:
        return None


def _hidden_below(layers: Layers, rel: str, present: str) -> list[str]:
    """What the image had below directory ``rel`` that the upper ``present`` does not hold."""
    gone = []
    for lower in layers.lowers:
        base = lower + rel
        for dirpath, dirnames, filenames in os.walk(base):
            sub = dirpath[len(base) :]
            for name in dirnames + filenames:
                inner = f"{sub}/{name}"
                if not os.path.lexists(present + inner):
                    gone.append(rel + inner)
            dirnames[:] = [d for d in dirnames if os.path.lexists(f"{present}{sub}/{d}")]
    return gone


def overlay_changes(layers: Layers) -> dict[str, str] | None:
    """Path -> ``A``/``C``/``D``, as the engine's diff gives them; None where only the
    engine can tell (a renamed directory)."""
    changes: dict[str, str] = {}
    top = layers.upper
    for dirpath, dirnames, filenames in os.walk(top):
        rel_dir = dirpath[len(top) :]
        for name in dirnames + filenames:
            full, rel = f"{dirpath}/{name}", f"{rel_dir}/{name}"
            try:
                st = os.lstat(full)
            except FileNotFoundError:
                continue  # removed while walking: the next judgement sees what is there
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                changes[rel] = "D"
                continue
            if stat.S_ISDIR(st.st_mode):
                if _xattr(full, _REDIRECT) is not None:
                    return None
                if _xattr(full, _OPAQUE) == b"y":
                    changes.update(dict.fromkeys(_hidden_below(layers, rel, full), "D"))
            changes[rel] = "C" if _in_image(layers, rel) else "A"
    return changes
