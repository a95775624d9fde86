"""Scenario files: YAML in, a validated ``Scenario`` out, or one line saying what is wrong.

Fault and check params are validated against the params model of the type the
entry names, so a misspelt param fails at load time, with its path.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..core.errors import ScenarioError, UnknownTypeError
from ..injector.conflicts import changes_accounts, first_conflict
from .reading import FileProblem, read_yaml, shown
from .solution import POSITIONAL, Template, check_template, default_names
from .steady import STEADY_PREFIX, steady_entries

# The shipped scenarios are package data beside this module; FIXOS_SCENARIO_DIR
# (or --scenario-dir) points elsewhere.
SCENARIO_DIR = Path(os.environ.get("FIXOS_SCENARIO_DIR") or Path(__file__).resolve().parent)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


ROLE_SERVICES: dict[str, list[str]] = {
    "all": ["nginx", "mariadb", "php8.2-fpm", "ssh"],
    "web": ["nginx", "ssh"],
    "app": ["php8.2-fpm", "ssh"],
    "db": ["mariadb", "ssh"],
}
"""what each role runs: ``all`` is the whole shop on one host; the others split it
web (nginx) -> app (php-fpm on TCP 9000) -> db (MariaDB on TCP 3306)."""

NEEDS = {"web": "app", "app": "db"}
"""the role each split role passes its requests to."""


class HostSpec(_Strict):
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    """also the host's DNS name on the episode's private network."""
    image: str = "server"
    role: Literal["all", "web", "app", "db"] = "all"
    services: list[str] = ROLE_SERVICES["all"]
    """services that must be up before the fault goes in (default: the role's); the
    image's other services are disabled at boot (they neither run nor start on restart)."""
    caps: list[Literal["NET_ADMIN"]] = []
    """capabilities granted to this host only (a network fault, and its repair, need NET_ADMIN)."""
    memory_mb: int = Field(default=512, ge=128, le=8192)
    cpus: float = Field(default=1.0, gt=0, le=8)
    pids: int = Field(default=512, ge=64, le=32768)
    log_disk_mb: int = Field(default=48, ge=8, le=1024)
    """size of /var/log, a filesystem of its own (tmpfs, counted in the memory cap)."""
    log_disk_inodes: int = Field(default=4096, ge=256, le=1_000_000)
    tmp_disk_mb: int | None = Field(default=None, ge=8, le=1024)
    """size of /tmp as a filesystem of its own (tmpfs, counted in the memory cap), for a
    scenario that fills it; None: /tmp is a directory of the writable layer."""
    disk_mb: int = Field(default=2048, ge=256, le=65536)
    """bound on the host's writable filesystem (its container's writable layer)."""
    decoys: list[Literal["archive"]] = []
    """innocent things a careless repair would remove, laid down at boot (part of the healthy
    host): ``archive``, last month's shipped orders, 4.4 MB under ``/var/log/shop-archive``."""

    @model_validator(mode="before")
    @classmethod
    def _services_of_role(cls, data: Any) -> Any:
        role = data.get("role") if isinstance(data, dict) else None
        if isinstance(role, str) and "services" not in data and role in ROLE_SERVICES:  # a list is no role
            return {**data, "services": ROLE_SERVICES[role]}
        return data


class _TypedEntry(_Strict):
    """An entry whose ``params`` are validated by the model of the class its ``type`` names,
    looked up in the registry passed as validation context under ``_registry``."""

    _registry: ClassVar[str]
    type: str
    host: str | None = None
    """which host; the scenario's first host when left out."""
    params: Any = Field(default=None, validate_default=True)

    @field_validator("type")
    @classmethod
    def _type_known(cls, v: str, info: ValidationInfo) -> str:
        registry = (info.context or {}).get(cls._registry)
        if registry is not None and v not in registry:
            name = v if len(v) <= 50 else f"{v[:47]}..."  # pydantic quotes the whole value after this
            raise ValueError(str(UnknownTypeError(registry.kind, name, registry.names())))
        return v

    @field_validator("params")
    @classmethod
    def _params_typed(cls, v: Any, info: ValidationInfo) -> Any:
        registry = (info.context or {}).get(cls._registry)
        type_name = info.data.get("type")
        if registry is None or type_name is None or type_name not in registry:
            return v  # no registry given, or the type validator already reported it
        return registry.get(type_name).Params.model_validate(v or {})


class FaultSpec(_TypedEntry):
    _registry = "faults"
    name: str = Field(default="", pattern=r"^[a-z][a-z0-9_]{0,39}$")
    """what the solution calls it (``{{ NAME.field }}``, ``{{ fix(NAME) }}``); left out,
    its type, or TYPE_N when the scenario has several of that type (``default_names``)."""

    @field_validator("name")
    @classmethod
    def _not_positional(cls, v: str) -> str:
        if POSITIONAL.fullmatch(v) or v == "fix":
            raise ValueError(f"{v!r} is reserved (positional references and fix() look like it)")
        return v


class CheckSpec(_TypedEntry):
    _registry = "checks"
    name: str
    scored: bool = True
    """scored checks give partial credit; an unscored one is a gate that zeroes the reward."""
    weight: float = Field(default=1.0, gt=0)


class Limits(_Strict):
    max_steps: int = Field(default=30, ge=1, le=1000)
    wall_seconds: float = Field(default=600, gt=0)
    command_timeout: float = Field(default=30, gt=0)


class Scenario(_Strict):
    id: str = Field(pattern=r"^([a-z0-9_]+|gen:[0-9]+:[0-9]+)$")
    """a file's name; ``gen:LEVEL:N`` for a generated world (fixos.scenarios.generator)"""
    title: str
    difficulty: Literal["easy", "medium", "hard"]
    instruction: str = Field(min_length=10)
    """the symptoms as a user would report them, never the root cause."""
    hosts: list[HostSpec] = Field(min_length=1)
    login: str | None = None
    """the host the agent's shell opens on (default: the first host); it can ``ssh`` to the others."""
    faults: list[FaultSpec] = []
    """empty: a fault-free control (nothing is broken; the right repair is none, the right
    report ``healthy``: ``fixos.episodes.tasks``); its scored checks pass as the agent finds it."""
    checks: list[CheckSpec] = Field(min_length=1)
    solution: str = Field(min_length=1)
    """the reference repair, a shell script run on the login host (``ssh db '...'`` reaches
    another host); ``{{ NAME.key }}`` names what the fault NAME drew from the seed,
    ``{{ fix(NAME) }}`` its type's reference repair (see fixos.scenarios.solution). Once
    loaded, a ``Template`` that knows the faults' names."""
    partial_solution: str | None = None
    """a repair of some faults only: must score strictly between 0 and 1 (a control has none)."""
    first_fixes: list[str] = []
    """the repairs of the first k faults only, k = 1 .. len(faults) - 1 (generated worlds):
    what calibration's budget-limited oracle (``first-fixes:K``) runs."""
    limits: Limits = Limits()
    tags: list[str] = []

    @model_validator(mode="before")
    @classmethod
    def _name_faults(cls, data: Any) -> Any:
        """Each fault without a ``name`` gets its default one (``default_names``)."""
        faults = data.get("faults") if isinstance(data, dict) else None
        if not isinstance(faults, list) or not all(isinstance(f, dict) for f in faults):
            return data  # the field validators say what is wrong
        types = [str(f.get("type")) for f in faults]
        given = [f["name"] if isinstance(f.get("name"), str) else None for f in faults]
        named = [{**f, "name": n} for f, n in zip(faults, default_names(types, given), strict=True)]
        return {**data, "faults": named}

    def host_of(self, spec: FaultSpec | CheckSpec) -> str:
        return spec.host or self.hosts[0].name

    @property
    def slug(self) -> str:
        """the id as a container, directory or task name may spell it (``gen:3:7`` -> ``gen-3-7``)"""
        return self.id.replace(":", "-")

    @property
    def login_host(self) -> str:
        return self.login or self.hosts[0].name

    @property
    def fault_types(self) -> list[str]:
        return [f.type for f in self.faults]


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]+")


def _field_path(loc: tuple[Any, ...]) -> str:
    """``hosts[0].name``; a key that is no plain name is quoted, its line breaks escaped, so the
    message stays one line (a fuzzed ``limits: {"\\n": null}`` broke it in two)."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            text = str(part) if len(str(part)) <= 50 else f"{str(part)[:47]}..."  # a key may be 1 MB
            if not _PLAIN_KEY.fullmatch(text):
                path += f"[{text!r}]"
            else:
                path += f".{text}" if path else text
    return path


def _first_error(exc: ValidationError) -> tuple[str, str]:
    err = exc.errors(include_url=False)[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] not in ("missing", "extra_forbidden") and "input" in err:
        message += f" (got {shown(err['input'])})"
    if err["type"] == "extra_forbidden":
        message = "unknown field"
    more = len(exc.errors()) - 1
    if more:
        message += f" (+{more} more)"
    return _field_path(loc), message


def _check_topology(scenario: Scenario) -> tuple[str, str] | None:
    """Host names unique, ``login`` one of them, and split roles that can serve the shop together."""
    names = [h.name for h in scenario.hosts]
    for i, host in enumerate(scenario.hosts):
        if host.name in names[:i]:
            return f"hosts[{i}].name", f"duplicate host name {shown(host.name)}"
    if scenario.login is not None and scenario.login not in names:
        return "login", f"no host named {shown(scenario.login)} (hosts: {shown(sorted(names))})"
    roles = [h.role for h in scenario.hosts]
    for i, host in enumerate(scenario.hosts):
        if host.role != "all" and host.role in roles[:i]:
            return f"hosts[{i}].role", f"a second {host.role!r} host (at most one host per split role)"
    for i, host in enumerate(scenario.hosts):
        needed = NEEDS.get(host.role)
        if needed is not None and needed not in roles:
            return f"hosts[{i}].role", (
                f"a {host.role!r} host needs a host with role {needed!r} to pass requests to "
                f"(roles: {shown(roles)})"
            )
    return None


def _check_references(scenario: Scenario) -> tuple[str, str] | None:
    topology = _check_topology(scenario)
    if topology:
        return topology
    if not scenario.faults and scenario.partial_solution is not None:
        return "partial_solution", "a fault-free control (no faults) has nothing to repair in part"
    names = {h.name for h in scenario.hosts}
    for kind, specs in (("faults", scenario.faults), ("checks", scenario.checks)):
        for i, spec in enumerate(specs):
            if spec.host is not None and spec.host not in names:
                return (
                    f"{kind}[{i}].host",
                    f"no host named {shown(spec.host)} (hosts: {shown(sorted(names))})",
                )
    named: set[str] = set()
    for i, fault in enumerate(scenario.faults):
        if fault.name in named:
            return f"faults[{i}].name", (
                f"duplicate fault name {shown(fault.name)} (a fault left unnamed is called by its type)"
            )
        named.add(fault.name)
    seen: set[str] = set()
    for i, check in enumerate(scenario.checks):
        if check.name.startswith(STEADY_PREFIX):
            return f"checks[{i}].name", (
                f"{shown(check.name)}: names starting {STEADY_PREFIX!r} belong to the inherited steady "
                "state, which a scenario may add to but never replace"
            )
        if check.name in seen:
            return f"checks[{i}].name", f"duplicate check name {shown(check.name)}"
        seen.add(check.name)
    if not any(c.scored for c in scenario.checks):
        return "checks", "at least one check must be scored"
    return None


def _check_conflicts(scenario: Scenario, faults: Any) -> tuple[str, str] | None:
    """Two faults on one host that cannot both be established (``fixos.injector.conflicts``)."""
    if faults is None:
        return None
    entries = [(scenario.host_of(f), f.type, f.params) for f in scenario.faults]
    found = first_conflict(entries, faults)
    if found is None:
        return None
    i, j, reason = found
    return f"faults[{j}]", f"cannot share a host with faults[{i}]: {reason}"


def _check_templates(scenario: Scenario, faults: Any) -> tuple[str, str] | None:
    """Every ``{{ ... }}`` of the solutions names a fault and a field it records, or a fix it has."""
    if faults is None:
        return None
    named = [(f.name, faults.get(f.type)) for f in scenario.faults]
    scripts = [("solution", scenario.solution), ("partial_solution", scenario.partial_solution)]
    scripts += [(f"first_fixes[{i}]", s) for i, s in enumerate(scenario.first_fixes)]
    for key, script in scripts:
        found = script and check_template(script, named)
        if found:
            line, problem = found
            return f"{key} line {line}", problem
    return None


def _bind_templates(scenario: Scenario) -> Scenario:
    """The solutions as ``Template``s that know the faults' names, for ``render``."""
    names = [f.name for f in scenario.faults]
    partial = scenario.partial_solution
    return scenario.model_copy(
        update={
            "solution": Template(scenario.solution, names),
            "partial_solution": None if partial is None else Template(partial, names),
            "first_fixes": [Template(s, names) for s in scenario.first_fixes],
        }
    )


def _inherit_steady_state(scenario: Scenario, path: str, checks: Any, faults: Any) -> Scenario:
    """The scenario with the steady state's gates (``fixos.scenarios.steady``) appended, per host."""
    inherited = []
    services = {h.name: list(h.services) for h in scenario.hosts}
    accounts = changes_accounts([(scenario.host_of(f), f.type, f.params) for f in scenario.faults], faults)
    for entry in steady_entries([h.name for h in scenario.hosts], services, accounts):
        try:
            inherited.append(CheckSpec.model_validate(entry, context={"checks": checks}))
        except ValidationError as exc:
            where, message = _first_error(exc)
            raise ScenarioError(path, "checks", f"inherited {entry['name']!r}: {where}: {message}") from None
    return scenario.model_copy(update={"checks": [*scenario.checks, *inherited]})


def parse_scenario(data: Any, path: str, *, faults: Any, checks: Any) -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(path, "top level", f"expected a mapping (got {type(data).__name__})")
    try:
        scenario = Scenario.model_validate(data, context={"faults": faults, "checks": checks})
    except ValidationError as exc:
        raise ScenarioError(path, *_first_error(exc)) from None
    problem = _check_references(scenario) or _check_conflicts(scenario, faults)
    problem = problem or _check_templates(scenario, faults)
    if problem:
        raise ScenarioError(path, *problem)
    scenario = _inherit_steady_state(_bind_templates(scenario), path, checks, faults)
    stem = Path(path).stem
    if path.endswith((".yaml", ".yml")) and stem != scenario.id:
        raise ScenarioError(path, "id", f"must match the file name {shown(stem)} (got {shown(scenario.id)})")
    return scenario


def load_scenario(path: Path, *, faults: Any, checks: Any) -> Scenario:
    """The scenario in ``path``, or a one-line ScenarioError naming the file and where in it."""
    try:
        data = read_yaml(path)
    except OSError as exc:
        raise ScenarioError(str(path), "file", f"cannot read: {exc.strerror or exc}") from None
    except FileProblem as exc:
        raise ScenarioError(str(path), exc.where, exc.problem) from None
    return parse_scenario(data, str(path), faults=faults, checks=checks)
