"""What each fault type declares so that a generator can compose it: a ``Recipe`` per variant.

A recipe says where a fault may go (the roles of the hosts that run what it breaks),
its symptom in a user's words (never the fault's name), the scored checks its repair
must pass (``own``: each fails while the fault is in, whatever else is broken), the
shop's pages it breaks (judged once per world, on the web host), what the repair must
start or reload on the fault's host, what the host needs to carry it (a capability, a
/tmp of its own), its seeded parameters, a difficulty weight, and its ground truth (a
cause class of ``CAUSES`` and the component it breaks). The resources a fault claims
(``fixos.injector.conflicts``) stay where they are: the generator asks them, so two
faults that would fight are never drawn together.

Kept as tables, one per family (services, resources, wire), as ``CLAIMS`` is: the
recipes are read together (by the generator, by the property tests); a new fault type
adds its rows to its family's table, or is simply never generated. Their order is
part of the draw: a row inserted before others changes worlds (bump the generator's
``VERSION``). The hand-written scenarios do not use them.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from . import resources, services, wire
from .base import CAUSES, Need, Recipe

RECIPES: tuple[Recipe, ...] = (*services.RECIPES, *resources.RECIPES, *wire.RECIPES)
"""every variant a generator may draw, in a fixed order (the draw depends on it)."""


def recipe_for(fault_type: str, params: Mapping[str, object]) -> Recipe | None:
    """The recipe a fault with these parameters was drawn from: the first of its type whose
    drawn words (its string parameters, which no seed changes) the fault has. A hand-written
    fault of a variant no recipe draws has none. One rule for splits and ground truth."""
    for recipe in RECIPES:
        if recipe.type != fault_type:
            continue
        words = {k: v for k, v in recipe.params(random.Random(0)).items() if isinstance(v, str)}
        if all(params.get(k) == v for k, v in words.items()):
            return recipe
    return None


__all__ = ["CAUSES", "RECIPES", "Need", "Recipe", "recipe_for"]
