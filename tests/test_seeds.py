"""Same seed, same broken world; another seed, another world (on real containers)."""

from __future__ import annotations

import pytest

from fixos.episodes.episode import Episode
from fixos.injector.process import INNOCENT_PROGRAMS
from fixos.scenarios.catalog import load_catalog

pytestmark = pytest.mark.live
WATCHED = [
    "/etc/nginx/nginx.conf",
    "/etc/nginx/sites-available/shop",
    "/etc/mysql/mariadb.conf.d/60-fixos.cnf",
    "/etc/shop/app.ini",
    "/etc/php/8.2/fpm/pool.d/www.conf",
]


def world(client, images, run_id, scenario_id: str, seed: int) -> dict:
    """What an agent would find: seeded choices, config bytes, junk files, rogue PIDs."""
    with Episode(load_catalog()[scenario_id], seed, client=client, images=images, run_id=run_id) as ep:
        host = ep.stack.hosts["web"]
        shell = ep.shell
        return {
            "seeded": [f.seeded for f in ep.faults],
            "files": {path: host.read_file(path) for path in WATCHED},
            "junk": shell.run("find /var/log -type f -size +64k -printf '%p %s\\n' | sort").output,
            "rogues": shell.run(  # scripts running that the healthy host does not (PIDs: in seeded)
                "for p in /proc/[0-9]*; do a=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); case \"$a\" in "
                "'/bin/sh /'*|'/usr/bin/perl /'*) echo $a;; esac; done | sort | grep -vF "
                + " ".join(f"-e {path}" for path in sorted(INNOCENT_PROGRAMS))
            ).output,
        }


@pytest.mark.parametrize("scenario_id", ["hard_1", "hard_3"])
def test_same_seed_same_world_other_seed_other_world(client, images, test_run_id, scenario_id):
    first = world(client, images, test_run_id, scenario_id, 1)
    again = world(client, images, test_run_id, scenario_id, 1)
    other = world(client, images, test_run_id, scenario_id, 2)
    assert first == again
    assert first["junk"] and first["rogues"], "the world has junk files and rogue processes"
    assert first["seeded"] != other["seeded"]
    assert first["files"] != other["files"] or first["junk"] != other["junk"]
