"""A host's changes against its image by what they hold, not when they were made: the
key under which an answer about those bytes may serve another host of the same image.

``HostFacts.files`` fingerprints changes by change time and inode, which no two hosts
share: right for "did this host change since the last look", useless across hosts. A
daemon's test of its configuration (``nginx -t`` and the like, ``fixos.verifier.
config_tests``) answers from what the files hold, so two hosts of one image that hold
the same bytes, links, owners and modes in everything the test reads get the same
answer, and one host's answer can serve the next without running the test again.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Sequence

from .host_files import open_in_root, read_pinned

Entry = tuple[str, int, int, int, int, int, int, int]
"""as ``fixos.stack.facts.Entry``: path, mode, owner, group, size, modification ns, change ns, inode."""


def digest_of(
    found: Sequence[Entry],
    from_upper: int,
    settled_ns: int,
    root_fd: int,
    related: Callable[[str], bool],
    inside: Callable[[str], bool],
    limit: int,
) -> bytes | None:
    """A digest of the ``related`` entries of ``found`` (the first ``from_upper`` are the
    overlay's, the rest the host's own mounts'): each by path, mode, owners, layer and
    opacity, and those ``inside`` what is asked about, but directories, by what the host's
    root (``root_fd``) holds there now. None when it cannot say: an entry changed after
    ``settled_ns`` (it may change again unseen), a file past ``limit``, one unreadable."""
    digest = hashlib.sha256()
    for index, entry in enumerate(found):
        path, mode = entry[0], entry[1]
        if not related(path):
            continue
        if entry[6] > settled_ns:
            return None
        item: list[object] = [path, mode, entry[2], entry[3], index < from_upper, entry[7] < 0]
        if inside(path) and not stat.S_ISDIR(mode):
            held = what_is_at(root_fd, path, limit)
            if held is None:
                return None
            item.append(held)
        digest.update(repr(item).encode())
    return digest.digest()


def what_is_at(root_fd: int, path: str, limit: int) -> bytes | None:
    """What the root ``root_fd`` holds at ``path`` now, resolved inside it: a file's digest,
    a link's target, another type's mark, ``gone``; None when it cannot say."""
    try:
        handle = open_in_root(root_fd, path)
    except FileNotFoundError:
        return b"gone"  # a deletion: the entry is the overlay's whiteout
    except OSError:
        return None
    try:
        st = os.fstat(handle)
        if stat.S_ISLNK(st.st_mode):
            return b"link " + os.readlink("", dir_fd=handle).encode("utf-8", "surrogateescape")
        if not stat.S_ISREG(st.st_mode):
            return b"type %o" % stat.S_IFMT(st.st_mode)  # a FIFO or a device is never opened
        data = read_pinned(handle, limit)
    except OSError:
        return None
    finally:
        os.close(handle)
    return None if data is None else hashlib.sha256(data).digest()
