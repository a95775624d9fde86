"""Solutions as templates: named faults' recorded fields, quoted, and the fault types' fixes."""

from __future__ import annotations

import copy
import pickle

import pytest

from fixos.core.errors import InvalidEpisode
from fixos.core.models import InjectedFault
from fixos.injector import FAULTS
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.solution import EXPRESSION, Template, default_names, render


def fault(fault_type: str = "t", params: dict | None = None, **seeded) -> InjectedFault:
    return InjectedFault(fault_type, "web", params or {}, seeded, "")


def test_named_fields_are_filled_and_quoted():
    faults = [fault(file="/etc/a b"), fault(processes=[{"pid": 909}], line="x'y")]
    script = Template("kill {{ hogs.processes.0.pid }}; edit {{conf.file}} {{ hogs.line }}", ["conf", "hogs"])
    assert render(script, faults) == "kill 909; edit '/etc/a b' 'x'\"'\"'y'"


def test_a_shell_brace_expression_is_left_as_it_is():
    script = Template("docker inspect -f '{{.State.Status}}' x", ["t"])
    assert render(script, [fault()]) == "docker inspect -f '{{.State.Status}}' x"


def test_unnamed_faults_are_called_by_type_and_numbered_when_repeated():
    assert default_names(["cpu_hog", "disk_fill", "cpu_hog"]) == ["cpu_hog_1", "disk_fill", "cpu_hog_2"]
    assert default_names(["cpu_hog", "cpu_hog"], ["hogs", None]) == ["hogs", "cpu_hog_2"]
    plain = [fault("disk_fill", junk="/var/log/a")]  # a plain str renders with the default names
    assert render("echo {{ disk_fill.junk }}", plain) == "echo /var/log/a"


def test_fix_renders_the_fault_types_reference_repair():
    broken = fault("config_broken", {"service": "nginx"}, file="/etc/x.conf", broken="a b", original="c;")
    script = render(Template("{{ fix(conf) }}\nnginx -t", ["conf"]), [broken])
    assert script.splitlines()[0].startswith("FIXOS_OLD='a b' FIXOS_NEW='c;' perl -0777 -i -pe ")
    assert script.splitlines()[0].endswith(" /etc/x.conf")
    assert script.splitlines()[1] == "nginx -t"


@pytest.mark.parametrize("expression", ["{{ x.file }}", "{{ t.nope }}", "{{ t.file.3 }}", "{{ fix(x) }}"])
def test_what_no_fault_recorded_is_an_invalid_episode(expression):
    with pytest.raises(InvalidEpisode, match="no fault recorded"):
        render(Template(f"echo {expression}", ["t"]), [fault(file="/x")])


def test_a_template_keeps_its_names_when_copied_or_pickled():
    script = Template("kill {{ hog.pid }}", ["hog"])
    for copied in (copy.deepcopy(script), pickle.loads(pickle.dumps(script))):
        assert copied == script and isinstance(copied, Template) and copied.names == ("hog",)


def _sample(fault_type: str, fields: tuple[str, ...]) -> dict:
    """What a fault of this type might record: a value for every declared field."""
    seeded: dict = {name: f"/{fault_type}/{name}" for name in fields}
    for name in ("pid", "limit", "bytes", "mb", "rate_bits", "index"):
        if name in seeded:
            seeded[name] = 4242
    if "processes" in seeded:
        seeded["processes"] = [
            {"name": "a", "pid": 4242, "path": "/a"},
            {"name": "b", "pid": 4243, "path": "/b"},
        ]
    if fault_type.startswith("tls_"):
        seeded["variant"] = "file"
    return seeded


def test_every_shipped_solution_renders_from_its_faults_declared_fields():
    for scenario in load_catalog().values():
        faults = [
            fault(f.type, f.params.model_dump(), **_sample(f.type, FAULTS.get(f.type).records))
            for f in scenario.faults
        ]
        for script in (scenario.solution, scenario.partial_solution):
            if script is not None:
                text = render(script, faults)
                assert not EXPRESSION.search(text), (scenario.id, text)
