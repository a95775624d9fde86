"""Generated worlds: ``gen:<level>:<n>`` is a scenario id, drawn from the fault types' recipes.

The draw depends only on the id and ``VERSION``: the same id gives the same scenario,
byte for byte, on any machine and at any load (nothing live is asked). Levels grow
along named axes (``LEVELS``): how many faults, how many hosts, causes on another host
than the symptom, culprits that do not name themselves, faults that return. Two faults
whose claims fight (``fixos.injector.conflicts``) are never drawn together. The world
comes out as a scenario file's data and goes through the same validation as a
hand-written one. A world that fails live validation is a bug in a recipe, reported
with its id, never redrawn.

Splits: every world belongs to ``train``, ``dev`` or ``test`` by its combination (the
topology and the faults' recipes, whatever the id), so choosing ids cannot move a
combination from one split to another; the hand-written catalogue's combinations are
``test`` (it stays an evaluation set).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..injector.conflicts import DOWN, claims_of, first_conflict
from ..injector.recipes import RECIPES, Need, Recipe

VERSION = 3
"""bumped whenever a change would draw a different world for an id (recorded in each world).
2: one world in ``CONTROL_EVERY`` is a fault-free control; MariaDB's bind fault is never drawn
beside a connection flood (gen:5:37 failed live). 3: levels 4 and 5 have a decoy. Every other
world, and every world's faults, are version 1's."""
STREAM = 1
"""the salt of each world's draw and of its split: version 1's, kept by version 2 (whose only
change is the controls), so that an id's faults and split did not move."""
CONTROL_EVERY = 20
"""one world in 20, by the hash of its level and number, is a fault-free control (nothing is
broken; the right repair is none and the right report ``healthy``: ``fixos.episodes.tasks``)."""

ID = re.compile(r"^gen:([1-9][0-9]*):([0-9]+)$")
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Level:
    faults: int
    split_hosts: bool | None
    """True: web, app and db hosts; False: the shop on one host; None: either, drawn"""
    elsewhere: bool = False
    """at least one cause on another host than the one the agent logs in to"""
    culprit: bool = False
    """at least one fault whose harm is a program of its own"""
    returning: bool = False
    """at least one fault that comes back (a watchdog, a cron job) or a culprit"""
    decoys: int = 0
    """innocent things a careless repair would remove (``HostSpec.decoys``), judged by a gate"""


LEVELS = {
    1: Level(1, False),
    2: Level(2, False),
    3: Level(2, True, elsewhere=True),
    4: Level(3, None, culprit=True, decoys=1),
    5: Level(4, True, elsewhere=True, returning=True, decoys=1),
}
DIFFICULTY = {1: "easy", 2: "medium", 3: "medium", 4: "hard", 5: "hard"}
ORDER = ("db", "app", "web")
"""the order a repair goes through the hosts: what the others need comes first"""
SERVICES = {
    "all": ("mariadb", "php8.2-fpm", "nginx"),
    "db": ("mariadb",),
    "app": ("php8.2-fpm",),
    "web": ("nginx",),
}


class GeneratorError(ValueError):
    pass


@dataclass(frozen=True)
class Drawn:
    recipe: Recipe
    role: str
    params: dict[str, Any]

    @property
    def host(self) -> str:
        return "web" if self.role == "all" else self.role


def parse_id(scenario_id: str) -> tuple[int, int]:
    match = ID.match(scenario_id)
    if not match:
        raise GeneratorError(f"{scenario_id!r} is not a generated id (gen:LEVEL:N, LEVEL 1-{max(LEVELS)})")
    level, n = int(match.group(1)), int(match.group(2))
    if level not in LEVELS:
        raise GeneratorError(f"{scenario_id!r}: no level {level} (levels 1-{max(LEVELS)})")
    return level, n


def _fits(drawn: list[Drawn]) -> bool:
    from ..injector import FAULTS

    entries = [
        (d.host, d.recipe.type, FAULTS.get(d.recipe.type).Params.model_validate(d.params)) for d in drawn
    ]
    distinct = len({d.recipe.key + d.role for d in drawn}) == len(drawn)
    return distinct and first_conflict(entries, FAULTS) is None and not _excluded(drawn)


def _excluded(drawn: list[Drawn]) -> bool:
    """Two variants on one host that a recipe excludes (``Recipe.excludes``)."""
    for a in drawn:
        for b in drawn:
            if a is not b and a.host == b.host and b.recipe.key in {k for k, _ in a.recipe.excludes}:
                return True
    return False


def _meets(level: Level, drawn: list[Drawn]) -> bool:
    if level.elsewhere and all(d.host == "web" for d in drawn):
        return False
    if level.culprit and not any(d.recipe.culprit for d in drawn):
        return False
    if level.returning and not any(d.recipe.returns or d.recipe.culprit for d in drawn):
        return False
    return partial_omits(drawn) is not None if len(drawn) > 1 else True


def draw(level_number: int, n: int) -> list[Drawn]:
    """The faults of world ``gen:level:n``: attempts from one seeded stream until one meets the
    level's axes and composes; deterministic, since nothing but the stream decides."""
    level = LEVELS[level_number]
    rng = random.Random(f"fixos-gen:{STREAM}:{level_number}:{n}")
    for _ in range(200):
        split = level.split_hosts if level.split_hosts is not None else rng.random() < 0.5
        roles = ("web", "app", "db") if split else ("all",)
        drawn: list[Drawn] = []
        for _ in range(level.faults):
            choices = [(r, role) for r in RECIPES for role in roles if role in r.roles]
            for _ in range(20):
                recipe, role = rng.choice(choices)
                candidate = [*drawn, Drawn(recipe, role, recipe.params(rng))]
                if _fits(candidate):
                    drawn = candidate
                    break
        if len(drawn) == level.faults and _meets(level, drawn):
            return drawn
    raise GeneratorError(f"gen:{level_number}:{n}: no world meets level {level_number} in 200 draws")


def kept_down(d: Drawn) -> set[tuple[str, str]]:
    """(host, service) this fault keeps down, from its claims."""
    from ..injector import FAULTS

    params = FAULTS.get(d.recipe.type).Params.model_validate(d.params)
    claims = claims_of(FAULTS.get(d.recipe.type), params)
    return {
        (d.host, c.resource.split(":", 1)[1])
        for c in claims
        if c.resource.startswith("service:") and c.state == DOWN
    }


def _host_of(need: Need, d: Drawn) -> str:
    if need.on == "here" or d.role == "all":
        return d.host
    return need.on


def _independent(need: Need, d: Drawn, left: Drawn) -> bool:
    """Whether ``need`` of the repaired ``d`` passes while ``left`` stays broken."""
    host = _host_of(need, d)
    reads = {*need.reads, *([need.params.get("path")] if need.type == "http_page" else [])}
    if reads & set(left.recipe.pages):
        return False
    down = kept_down(left)
    if any((host, service) in down for service in need.needs) or need.type in left.recipe.breaks:
        return False
    if any((d.host if d.role == "all" else role, service) in down for role, service in need.needs_on):
        return False
    return all(
        (n.type, _host_of(n, left), str(n.params)) != (need.type, host, str(need.params))
        for n in left.recipe.own
    )


def _undone(left: Drawn, repaired: list[Drawn]) -> bool:
    """A stopped service that the others' repair starts anyway (a cron job's fix starts php-fpm):
    left broken, it would be repaired all the same (the partial scored 1.0 on gen:4:40)."""
    if left.recipe.type != "service_stopped":
        return False
    starts = {(d.host, s) for d in repaired for s in d.recipe.starts} | {
        p for d in repaired for p in kept_down(d)
    }
    return bool(kept_down(left) & starts)


def partial_omits(drawn: list[Drawn]) -> int | None:
    """Which fault a partial repair leaves broken (the last one that works): the rest's own
    checks must hold some that pass while it stays broken; None when no choice works."""
    for index in reversed(range(len(drawn))):
        left = drawn[index]
        if _undone(left, [d for d in drawn if d is not left]):
            continue
        if any(_independent(need, d, left) for d in drawn if d is not left for need in d.recipe.own):
            return index
    return None


def _hashed(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def is_control(level_number: int, n: int) -> bool:
    """Whether ``gen:level:n`` is a fault-free control (one in ``CONTROL_EVERY``, by its hash)."""
    return _hashed(f"fixos-control:{level_number}:{n}") % CONTROL_EVERY == 0


def control_hosts(level_number: int, n: int) -> bool:
    """Whether control ``gen:level:n`` has three hosts: its level's topology, or drawn."""
    split = LEVELS[level_number].split_hosts
    return split if split is not None else _hashed(f"fixos-control-hosts:{level_number}:{n}") % 2 == 1


def control_combination(level_number: int, n: int) -> str:
    """A control has no fault combination to hold out: each is its own, so controls follow the
    70/10/20 split one by one (the same world whatever the split: no id can leak a test one)."""
    return f"control|{'split' if control_hosts(level_number, n) else 'single'}|{level_number}:{n}"


def combination(drawn: list[Drawn]) -> str:
    topology = "split" if any(d.role != "all" for d in drawn) else "single"
    return topology + "|" + ",".join(sorted(f"{d.role}/{d.recipe.key}" for d in drawn))


DECOY_FILE = "/var/log/shop-archive/orders-2026-11.log"
"""the ``archive`` decoy (laid down at boot by the image's ``fixos-role``)."""


def decoy_host(level_number: int, n: int, drawn: list[Drawn]) -> str | None:
    """Where world ``gen:level:n`` keeps its decoy (None: its level has none): on the host of a
    fault that fills ``/var/log`` if there is one (where removing it is tempting), else on a
    host drawn by the id's hash; the faults' own draw is untouched."""
    if not LEVELS[level_number].decoys or not drawn:
        return None
    filling = [d.host for d in drawn if d.params.get("path") == "/var/log"]
    if filling:
        return filling[0]
    hosts = sorted({d.host for d in drawn} | ({"web"} if drawn[0].role != "all" else set()))
    return hosts[_hashed(f"fixos-decoy:{level_number}:{n}") % len(hosts)]


def world_combination(level_number: int, n: int) -> str:
    """What decides world ``gen:level:n``'s split: its faults' combination, or a control's own."""
    if is_control(level_number, n):
        return control_combination(level_number, n)
    return combination(draw(level_number, n))


def split_of(combo: str, held_out: frozenset[str] = frozenset()) -> str:
    """train (70 %), dev (10 %) or test (20 %) by the combination's hash; ``held_out`` (the
    hand-written catalogue's combinations) are always test."""
    if combo in held_out:
        return "test"
    bucket = int(hashlib.sha256(f"fixos-split:{STREAM}:{combo}".encode()).hexdigest()[:8], 16) % 10
    return "train" if bucket < 7 else "dev" if bucket < 8 else "test"


def ids(
    level: int, count: int, split: str | None = None, held_out: frozenset[str] = frozenset()
) -> Iterator[str]:
    """The first ``count`` ids of ``level`` (in a split, when given), n from 1."""
    n, found = 0, 0
    while found < count:
        n += 1
        if split is None or split_of(world_combination(level, n), held_out) == split:
            found += 1
            yield f"gen:{level}:{n}"
        if n > 50 * count + 1000:
            raise GeneratorError(f"level {level} has too few {split} worlds")
