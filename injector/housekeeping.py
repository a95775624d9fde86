"""Host housekeeping gone wrong: a /tmp with no space left, and log rotation that
no longer rotates the shop's log while it fills /var/log.

Tried on the image before keeping. The status page renders through a file in
``sys_get_temp_dir()`` (images/server/rootfs/var/www/app/status.php): with /tmp
full it answers 500 and logs "Write of N bytes failed with errno=28". The
logrotate variants are the ones under which logrotate 3.21 (the image's) skips
the shop's access log: an unknown group in ``create``, a rotation count that is
not a number, a ``postrotate`` without ``endscript`` (errors: the whole file is
skipped), a misspelt or too narrow path (silently nothing to rotate), a size
threshold no log on a 48 MB filesystem reaches. A misspelt directive alone
(``compres``) is only a warning and rotation goes on, so it is not one of them.
"""

from __future__ import annotations

import base64
import random
import shlex
from collections.abc import Mapping
from typing import Any

from pydantic import Field

from ..core.errors import InvalidEpisode
from ..core.models import Outcome
from ..core.words import word
from ..shells.base import Shell
from .base import FAULTS, Fault, FaultParams
from .conflicts import OWN, Claim

# What piles up in a web server's /tmp: a line of each, the name's {token}s drawn from the seed.
TMP_JUNK = [
    ("/tmp/orders-export-{day}.csv", "1042,Harbor Cafe,Mooring line 12mm,4,shipped,2026-11-27 09:14:02"),
    ("/tmp/php{token}", 'Content-Disposition: form-data; name="catalogue"; filename="catalogue-2026.xlsx"'),
    ("/tmp/shop-dump-{day}.sql", "INSERT INTO `orders` VALUES (1042,'Harbor Cafe','Mooring line 12mm',4);"),
    ("/tmp/tmp.{token}", "resize: product-4411.jpg 2400x1800 -> 800x600 q=85 (cache block)"),
    ("/tmp/invoice-batch-{day}.pdf.part", "%PDF-1.4 1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj"),
]
TMP_KEPT = ["/tmp/.shop-backup.lock", "/tmp/shop-queue/worker.pid"]
"""what the host's own programs keep in /tmp (shop-backup's lock, the queue worker's PID): a
repair that empties /tmp wholesale deletes them (the scenarios' ``paths_exist`` gate)."""


def _token(rng: random.Random, n: int) -> str:
    return "".join(
        rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789") for _ in range(n)
    )


@FAULTS.register
class TmpFull(Fault):
    """/tmp (a tmpfs the scenario sizes: ``tmp_disk_mb``) filled to the last block by
    2-4 stale, plausibly named files (which, their split and ages from the seed),
    beside what the host's programs keep there (``TMP_KEPT``)."""

    type = "tmp_full"
    records = ("files", "junk", "kept")

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The stale files removed; what the host's programs keep in /tmp stays."""
        return f"printf '%s\\n' {word(seeded['junk'])} | xargs -r rm -f --"

    @classmethod
    def claims(cls, params: FaultParams) -> list[Claim]:
        return [Claim("fill:/tmp", OWN, "fills /tmp to the last block")]

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.files: list[str] = []
        """the junk inject wrote"""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        if shell.run("findmnt -no FSTYPE --target /tmp").output.strip() != "tmpfs":
            raise InvalidEpisode("/tmp is not a filesystem of its own (give the host tmp_disk_mb)")
        picks = rng.sample(TMP_JUNK, rng.randint(2, 4))
        weights = [rng.randint(1, 5) for _ in picks]
        avail = int(shell.run("df -B1 --output=avail /tmp | tail -n 1").output)
        files = []
        for index, ((template, line), weight) in enumerate(zip(picks, weights, strict=True)):
            path = template.format(
                day=f"2026-11-{rng.randint(10, 27)}", token=_token(rng, 6 + 4 * (index % 2))
            )
            quoted, age = shlex.quote(path), rng.randint(2, 40)
            last = index == len(picks) - 1
            # The last file takes whatever is left: df then shows 100% and no write fits.
            size = "" if last else f" | head -c {avail * weight // sum(weights) // 4096 * 4096}"
            shell.run(
                f"yes {shlex.quote(line)}{size} > {quoted} 2>/dev/null; touch -d '{age} days ago' {quoted}",
                timeout=60,
            )
            files.append(path)
        self.files = files
        return {"files": files, "junk": "\n".join(files), "kept": TMP_KEPT}

    def confirm(self, shell: Shell) -> Outcome:
        # Its own junk is there and nothing fits: a 64 KiB write (the page's is ~2) fails.
        present = bool(self.files) and shell.run("ls -d -- " + " ".join(map(shlex.quote, self.files))).ok
        probe = shell.run("{ head -c 65536 /dev/zero > /tmp/.fixos-probe; } 2>&1; rm -f /tmp/.fixos-probe")
        pct = shell.run("df --output=pcent /tmp | tail -n 1").output.strip()
        ok = present and "No space left" in probe.output
        return Outcome(
            ok, f"df shows /tmp at {pct}; junk present: {present}; a write: {probe.output.strip()[:80]}"
        )

    def revert(self, shell: Shell) -> None:
        if self.files:
            shell.run("rm -f -- " + " ".join(map(shlex.quote, self.files)))


ROTATE_CONFIG = "/etc/logrotate.d/nginx"
SHOP_LOG = "/var/log/nginx/shop.access.log"

# (variant, what it replaces, with what): each leaves the shop's log out of rotation.
ROTATE_VARIANTS = [
    ("unknown_group", "create 0640 www-data adm\n", "create 0640 www-data admin\n"),
    ("rotate_count", "rotate 14\n", "rotate 14d\n"),
    ("no_endscript", "nginx rotate >/dev/null 2>&1\n\tendscript\n", "nginx rotate >/dev/null 2>&1\n"),
    ("path_typo", "/var/log/nginx/*.log {", "/var/log/ngnix/*.log {"),
    ("path_list", "/var/log/nginx/*.log {", "/var/log/nginx/access.log /var/log/nginx/error.log {"),
    ("minsize", "daily\n", "daily\n\t# only rotate what is worth it (OPS-311)\n\tminsize {size}\n"),
    ("size", "daily\n", "# rotate by size, not by day (OPS-311)\n\tsize {size}\n"),
]
_ACCESS_LINE = (
    '203.0.113.{n} - - [2{d}/Nov/2026:0{h}:14:07 +0000] "GET /status HTTP/1.1" 200 1804 "-" '
    '"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36"'
)


@FAULTS.register
class LogrotateBroken(Fault):
    """The nginx logrotate configuration no longer rotates the shop's access log
    (which mistake, from the seed: ``ROTATE_VARIANTS``), and that log has grown
    until /var/log is ``percent`` full. The repair fixes the configuration and
    rotates: the log's lines are kept in the rotated file."""

    type = "logrotate_broken"
    records = ("variant", "file", "broken", "bytes", "original")

    def fix(self, seeded: Mapping[str, Any]) -> str:
        """The configuration restored, then a rotation forced (what piled up rotated)."""
        conf = word(seeded["file"])
        return f"echo {word(seeded['original'])} | base64 -d > {conf}\nlogrotate -f {conf}"

    class Params(FaultParams):
        percent: int = Field(default=85, ge=50, le=97)

    @classmethod
    def claims(cls, params: FaultParams) -> list[Claim]:
        return [
            Claim("config:logrotate-nginx", OWN, f"edits {ROTATE_CONFIG}"),
            Claim(
                "fill:/var/log", OWN, f"grows the shop's access log until /var/log is {params.percent}% full"
            ),
        ]

    def __init__(self, params: FaultParams) -> None:
        super().__init__(params)
        self.original = ""
        self.written = ""
        self.bytes = 0
        """the configuration before and after the edit, and how much the log grew"""

    def inject(self, shell: Shell, rng: random.Random) -> dict[str, Any]:
        variant, old, new = rng.choice(ROTATE_VARIANTS)
        new = new.replace("{size}", rng.choice(["2G", "5G", "10G"]))
        original = shell.run(f"cat {ROTATE_CONFIG}").output
        if old not in original:
            raise InvalidEpisode(f"{ROTATE_CONFIG} has no {old.strip()!r}")
        # The shop's logs as the last rotation that worked left them: nginx, reopening its
        # logs, gives them to its worker user (any rotation now does the same).
        shell.run(f"chown www-data {SHOP_LOG} {SHOP_LOG.replace('access', 'error')}")
        shell.run(
            f"FIXOS_OLD={shlex.quote(old)} FIXOS_NEW={shlex.quote(new)} perl -0777 -i -pe "
            f"'s/\\Q$ENV{{FIXOS_OLD}}\\E/$ENV{{FIXOS_NEW}}/' {ROTATE_CONFIG}"
        )
        line = _ACCESS_LINE.format(n=rng.randint(2, 250), d=rng.randint(0, 7), h=rng.randint(0, 9))
        size, used = (
            int(x) for x in shell.run("df -B1 --output=size,used /var/log | tail -n 1").output.split()
        )
        # df rounds Use% up: aim half a percent under, from what is used rounded to 128 KiB.
        target = size * (self.params.percent - 0.5) / 100
        self.bytes = max(0, int(target - (-(-used // 131072) * 131072))) // 4096 * 4096
        shell.run(f"yes {shlex.quote(line)} | head -c {self.bytes} >> {SHOP_LOG}; true", timeout=60)
        self.original, self.written = original, shell.run(f"cat {ROTATE_CONFIG}").output
        if self.written == original:
            raise InvalidEpisode(f"cannot edit {ROTATE_CONFIG}")
        restore = base64.b64encode(original.encode()).decode()  # the oracle's: `base64 -d` it back
        return {
            "variant": variant,
            "file": ROTATE_CONFIG,
            "broken": new.strip(),
            "bytes": self.bytes,
            "original": restore,
        }

    def confirm(self, shell: Shell) -> Outcome:
        # This fault's own edit is in the file and the log it let grow is still that big.
        edited = bool(self.written) and shell.run(f"cat {ROTATE_CONFIG}").output == self.written
        grown = shell.run(f"stat -c %s {SHOP_LOG}").output.strip()
        pct = shell.run("df --output=pcent /var/log | tail -n 1").output.strip()
        big = grown.isdigit() and int(grown) >= self.bytes
        return Outcome(
            edited and big,
            f"{ROTATE_CONFIG} as the fault left it: {edited}; {SHOP_LOG}: {grown} bytes; /var/log {pct}",
        )

    def revert(self, shell: Shell) -> None:
        if self.original:
            encoded = base64.b64encode(self.original.encode()).decode()
            shell.run(f"echo {encoded} | base64 -d > {ROTATE_CONFIG}")  # the grown log stays
