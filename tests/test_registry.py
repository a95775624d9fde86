"""The type registries: one spelling of each name, on its class, and nothing left out."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import fixos.injector
import fixos.verifier
from fixos.agents import AGENTS
from fixos.core.errors import UnknownTypeError
from fixos.core.registry import Registry, RegistryError
from fixos.injector import FAULTS, Fault
from fixos.verifier import CHECKS, Check


def _subclasses(base: type, package: object) -> list[type]:
    """Every subclass of ``base`` defined anywhere in ``package``, its modules all imported."""
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):  # type: ignore[attr-defined]
        importlib.import_module(info.name)
    found, todo = [], list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith(package.__name__ + "."):  # type: ignore[attr-defined]
            found.append(cls)
    return found


@pytest.mark.parametrize(
    ("registry", "base", "package"), [(FAULTS, Fault, fixos.injector), (CHECKS, Check, fixos.verifier)]
)
def test_every_class_is_registered_under_its_own_type(registry, base, package):
    classes = _subclasses(base, package)
    assert len(classes) == len(registry.names())
    for cls in classes:
        assert registry.get(cls.type) is cls


def test_every_agent_loads_under_its_own_name():
    for name in AGENTS.names():
        assert AGENTS.get(name).name == name


class Alpha(Check):
    type = "alpha"


class AlphaAgain(Check):
    type = "alpha"


def test_a_name_is_taken_once_and_must_be_there():
    registry: Registry[Check] = Registry("check type", [Alpha])
    assert registry.register(Alpha) is Alpha, "registering the same class again is harmless"
    with pytest.raises(RegistryError, match="'alpha': registered twice"):
        registry.register(AlphaAgain)
    with pytest.raises(RegistryError, match="no `type` name"):
        registry.register(Check)


def test_a_lazy_entry_must_load_the_class_of_that_name():
    registry: Registry[Check] = Registry("check type", lazy={"beta": f"{__name__}:Alpha"})
    assert "beta" in registry
    with pytest.raises(RegistryError, match="calls itself 'alpha'"):
        registry.get("beta")


def test_an_unknown_name_lists_the_valid_ones():
    with pytest.raises(UnknownTypeError) as caught:
        CHECKS.get("no_such_check")
    assert "http_page" in str(caught.value) and "sql_value" in str(caught.value)
