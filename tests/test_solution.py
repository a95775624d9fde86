from __future__ import annotations

import pytest

from fixos.core.errors import InvalidEpisode
from fixos.core.models import InjectedFault
from fixos.scenarios.solution import render


def fault(**seeded) -> InjectedFault:
    return InjectedFault("t", "web", {}, seeded, "")


def test_placeholders_are_filled_and_quoted():
    faults = [fault(file="/etc/a b"), fault(processes=[{"pid": 909}], line="x'y")]
    script = "kill {{ f1.processes.0.pid }}; edit {{f0.file}} {{ f1.line }}"
    assert render(script, faults) == "kill 909; edit '/etc/a b' 'x'\"'\"'y'"


@pytest.mark.parametrize("name", ["{{ f2.file }}", "{{ f0.nope }}", "{{ f0.file.3 }}"])
def test_unknown_placeholders_are_an_invalid_episode(name):
    with pytest.raises(InvalidEpisode, match="no fault recorded"):
        render(f"echo {name}", [fault(file="/x")])
