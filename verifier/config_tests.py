"""The daemons' own tests of their configuration (``nginx -t``, ``php-fpm8.2 -t``,
``mariadbd --help --verbose``), run by the engine in the host for the
``services_official`` gate, and kept for an episode's next judgement while what they
read has not changed.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..core.errors import ShellError
from ..shells.base import TIMEOUT_EXIT_CODE
from ..shells.tagged import Tagged, side_by_side
from .base import Probe

# The same tests as argument vectors, for the engine to run in the host with no shell.
ARGV = {
    "nginx": ["/usr/sbin/nginx", "-t", "-q"],
    "php-fpm8.2": ["/usr/sbin/php-fpm8.2", "-t"],
    "mariadbd": ["/usr/sbin/mariadbd", "--help", "--verbose"],
}
_HELP_ONLY = {"mariadbd"}
"""tests whose stdout is a listing, not a complaint."""


CONFIG_TREES = ("/etc/nginx", "/etc/php", "/etc/mysql", "/etc/ssl")
"""what the daemons' config tests read: every entry below, metadata and change time."""
CONFIG_NEIGHBOURS = (
    "/etc/passwd",
    "/etc/group",
    "/var/log",
    "/var/log/nginx",
    "/var/log/mysql",
    "/usr/sbin/nginx",
    "/usr/sbin/php-fpm8.2",
    "/usr/sbin/mariadbd",
    "/etc/my.cnf",
    "/etc/alternatives/my.cnf",
    "/root/.my.cnf",
)
"""what else they open (the users they run as, the log directories they check, the option
files MariaDB reads beside its tree: a bogus option in root's own fails its test): the entry
itself, not what is below."""
CONFIG_NAMES = ("/etc/hosts", "/etc/resolv.conf")
"""how they resolve the names they are given, by content: the engine rewrites these two
files in place (same content, a new change time) as it pleases."""
_STAT = r"%p %y %s %i %C@ %m %U %G %l\n"

_LOADER = (
    ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/etc/ld.so.conf.d"),
    ("/etc/ld.so.preload", "/etc/ld.so.cache", "/etc/ld.so.conf"),
)
ACROSS_HOSTS = {
    "mariadbd": (
        ("/etc/mysql", "/usr/lib/mysql", *_LOADER[0]),
        (
            "/etc/my.cnf",
            "/etc/alternatives/my.cnf",
            "/root/.my.cnf",
            "/root/.mylogin.cnf",
            "/usr/sbin/mariadbd",
            "/etc/passwd",
            "/etc/group",
            *_LOADER[1],
        ),
    ),
    "php-fpm8.2": (
        ("/etc/php", "/usr/lib/php", *_LOADER[0]),
        ("/usr/sbin/php-fpm8.2", "/etc/passwd", "/etc/group", *_LOADER[1]),
    ),
}
"""the tests whose answer one host may lend another of the same image, and everything each
reads (trees, entries): its configuration, its binary and the libraries it loads, the
accounts it runs as. Measured, not assumed: neither answers otherwise for /var/log or /run
emptied or locked, the data directory gone or /etc/hosts rewritten; both for a changed
~/.my.cnf or a pool user gone. nginx's test is never lent: it resolves the names of its
upstreams and loads the episode's own certificates. Only passes are lent (``tests_in_host``)."""
ACROSS_KEPT = 256
"""answers a judge keeps in memory at most (a fault's seeded edit makes each episode's own);
on disk, ``fixos.records.config_answers.KEPT_FILES``"""


MEMO_KEY = "config_tests"
"""where ``Probe.memo`` keeps the tests' answers: {key of what they read: {name: complaint}}."""
SPARED = ("nginx",)
"""the tests an untouched host's harness session answers before its faults go in
(``answered_before_faults``): those never lent between hosts (``ACROSS_HOSTS``)."""


def _config_key(probe: Probe) -> str:
    """A digest of everything the daemons' config tests read, as the host holds it now:
    each entry's type, size, inode, owner, mode, link target and change time. The change
    time is the kernel's (no host may set the clock): any write, rename, chmod or new
    entry moves it, so equal keys mean the tests would answer the same. "" when the
    session cannot tell (then nothing is reused).

    Where the host's facts are read from this machine (``Facts.files``: what it changed
    against its image, and its own mounts, by the same fields; the rest is the image's and
    cannot have changed), a fresh reading of them is the key: no find in the judge."""
    read = getattr(probe.access, "facts", None)
    facts = read() if read is not None else None
    if facts is not None:
        return _facts_key(facts)
    trees = " ".join(shlex.quote(probe.path(p)) for p in CONFIG_TREES)
    single = " ".join(shlex.quote(probe.path(p)) for p in CONFIG_NEIGHBOURS)
    names = " ".join(shlex.quote(probe.path(p)) for p in CONFIG_NAMES)
    out = probe.shell.run(
        f"{{ find {trees} -printf '{_STAT}'; find {single} -maxdepth 0 -printf '{_STAT}'; "
        f"timeout 2 head -c 65536 {names}; }} 2>&1 | md5sum",
        timeout=10,
    )
    digest = out.output.split()[0] if out.ok and out.output.split() else ""
    return digest if re.fullmatch(r"[0-9a-f]{32}", digest) else ""


def _facts_key(facts: Any) -> str:
    return "facts:" + facts.files([*CONFIG_TREES, *CONFIG_NAMES], entries=CONFIG_NEIGHBOURS).hex()


SETTLE_TRIES = 3
"""readings of a just-booted host's facts at most, ``SETTLE_WAIT`` apart, until nothing the
tests read still settles (a last log or certificate written within ``facts.SETTLING_NS``)."""
SETTLE_WAIT = 0.06
"""seconds: past the facts' settling time (``fixos.stack.facts.SETTLING_NS``, 50 ms)."""


def _settled_key(read_facts: Callable[[], Any]) -> str | None:
    """The key of what the tests read, from a reading in which no entry was still settling
    (such a reading's key equals no other, itself included); None if none was."""
    for _ in range(SETTLE_TRIES):
        facts = read_facts()
        if facts is None:
            return None
        key = _facts_key(facts)
        if _facts_key(facts) == key:
            return key
        time.sleep(SETTLE_WAIT)
    return None


def answered_before_faults(read_facts: Callable[[], Any], shell: Any, names: Sequence[str]) -> dict[str, Any]:
    """A host's ``Probe.memo`` entries for the tests among ``names`` that ``SPARED`` lists,
    run through ``shell``: the harness's session in a host that neither a fault nor an agent
    has touched yet (the session that waited for its boot, a clean environment), so that the
    reset's first judgement finds them kept instead of paying an engine exec (~46 CPU-ms
    machine-wide: runc, its shim, the engine). Kept under the key of what they read, taken
    before and after they ran, as ``tests_in_host`` keeps its own: a fault that changes what
    they read (most configuration faults) makes the judgement run them again, in the host
    through the engine. ``{}`` when nothing could be kept (no facts: a remote engine; a
    session that broke; a test that did not answer; a change meanwhile). Under load a boot's
    last writes (logs, certificates) could still be settling: that reading is taken again."""
    wanted = [n for n in names if n in SPARED]
    if not wanted:
        return {}
    try:
        key = _settled_key(read_facts)
        if key is None:
            return {}
        tests = {}
        for name in wanted:
            # in a subshell from /, as the engine's exec would start it: the session keeps its cwd
            out = shell.run(f"(cd / && exec {shlex.join(ARGV[name])}) 2>&1", timeout=30.0)
            if out.exit_code in (TIMEOUT_EXIT_CODE, 126) or out.timed_out:
                return {}
            lines = out.output.strip().splitlines()
            tests[name] = "" if out.ok else (lines[0] if lines else f"exit {out.exit_code}")[:160]
        if _settled_key(read_facts) != key:  # a new reading: changed while they ran
            return {}
    except (OSError, ShellError):
        return {}
    return {MEMO_KEY: {key: tests}}


def tests_in_host(probe: Probe, names: list[str]) -> dict[str, str]:
    """Each daemon's config test run by the engine in the host, never in the inspector:
    the daemon loads what its configuration names (a PHP extension, a MariaDB plugin),
    which must not run with the inspector's rights. The binary is the packaged one
    exactly when the ``programs_unchanged`` gate passes, and without it no verdict counts.

    The tests cost an engine exec (one for the three: ``side_by_side``) and ~0.2 CPU-s
    (``mariadbd --help --verbose`` most of it), and most judgements of an episode find
    the configuration as the last one did: their answers are kept in ``probe.memo``
    under the key of what they read (``_config_key``), taken before and after they ran
    (a change meanwhile keeps nothing). A configuration that includes a file outside those trees could change
    that file unseen: the final verdict's restarts start each daemon from it anyway."""
    run_program = getattr(probe.access, "run_program", None)
    if run_program is None:
        return dict.fromkeys(names, "no way to run the host's own test from this vantage point")
    memo = probe.memo
    key = _config_key(probe) if memo is not None else ""
    kept = (memo.get(MEMO_KEY, {}).get(key) if memo is not None and key else None) or {}
    tests = {n: kept[n] for n in names if n in kept}
    if len(tests) == len(names):
        return tests
    lent = _lent_keys(probe, [n for n in names if n not in tests])
    across = probe.across if probe.across is not None else {}
    tests.update({n: across[k] for n, k in lent.items() if k in across})
    ran, answered = (
        _run_tests(run_program, [n for n in names if n not in tests])
        if len(tests) < len(names)
        else ({}, True)
    )
    tests.update(ran)
    if ran and answered and probe.across is not None:
        # Only a pass is lent: a failure may be the agent's doing without a byte changed
        # (a leftover loop killing the test, the host's memory exhausted), and lent it would
        # fail every other host of those bytes, in this run and, kept on disk, in later ones.
        passed = [n for n in ran if ran[n] == ""]
        again = _lent_keys(probe, passed) if passed else {}
        for name in passed:  # only what was read the same before and after the test ran
            if lent.get(name) is not None and again.get(name) == lent[name]:
                probe.across[lent[name]] = ran[name]
        while len(probe.across) > ACROSS_KEPT:
            probe.across.pop(next(iter(probe.across)))
    if memo is not None and key and answered and _config_key(probe) == key:
        memo[MEMO_KEY] = {key: tests}
    return {n: tests[n] for n in names}


def _lent_keys(probe: Probe, names: list[str]) -> dict[str, str]:
    """name -> the key under which its answer may serve another host: the image's layers
    and what the host holds in everything the test reads (``fixos.stack.contents``); only
    for the tests ``ACROSS_HOSTS`` names, read from this machine, and settled."""
    # FIXOS_LEND=0: each host runs its own (the way of before, for A/B figures)
    wanted = [n for n in names if n in ACROSS_HOSTS and os.environ.get("FIXOS_LEND") != "0"]
    read, view = getattr(probe.access, "facts", None), getattr(probe.access, "view", None)
    if probe.across is None or not wanted or read is None or view is None:
        return {}
    facts, layers = read(), view().layers
    if facts is None or layers is None:
        return {}
    # the image's layers; not the engine's own "-init" layer of each container (its mount
    # points for /etc/hosts and the like, the same for every container, named for each)
    image = ":".join(lower for lower in layers.lowers if not lower.rstrip("/").endswith("-init/diff"))
    keys = {}
    for name in wanted:
        digest = facts.contents(*ACROSS_HOSTS[name])
        if digest is not None:
            keys[name] = f"{name} {image} {digest.hex()}"
    return keys


def _run_tests(run_program: Any, names: list[str]) -> tuple[dict[str, str], bool]:
    """Each test's complaint ("" when it passed), side by side in one engine exec
    (``side_by_side``); and whether every test answered (none timed out, none failed to
    start: answers worth keeping)."""
    bodies = [shlex.join(ARGV[n]) + (" 2>&1 >/dev/null" if n in _HELP_ONLY else " 2>&1") for n in names]
    tagged = Tagged(names)
    run = run_program(side_by_side(bodies), 30.0, on_output=tagged.feed)
    tests, answered = {}, True
    for name, out in zip(names, tagged.results(run), strict=True):
        lines = out.output.strip().splitlines()
        tests[name] = "" if out.ok else (lines[0] if lines else f"exit {out.exit_code}")[:160]
        answered = answered and out.exit_code not in (TIMEOUT_EXIT_CODE, 126)
    return tests, answered
