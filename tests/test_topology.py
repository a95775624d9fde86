"""Multi-host topologies: roles split the shop web -> app -> db, hosts reach each
other by name, the login host can ``ssh`` to the others, and a multi-host
episode scores oracle 1.0 over SSH and nop 0.0 over exec.

One 3-host stack is shared by the module's stack tests; the two episodes run
side by side.
"""

from __future__ import annotations

import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fixos.agents import Endpoints, Task
from fixos.agents.external import VERIFY_REQUEST, ExternalAgent
from fixos.core.errors import FixOSError, ScenarioError
from fixos.episodes.agent_shells import AgentShells
from fixos.episodes.episode import run_episode
from fixos.injector import FAULTS
from fixos.records.failures import EpisodeStatus
from fixos.scenarios.catalog import load_catalog
from fixos.scenarios.schema import ROLE_SERVICES, HostSpec, load_scenario
from fixos.stack.hosts import Stack
from fixos.stack.leftovers import remove_labelled
from fixos.verifier import CHECKS

SPLIT = textwrap.dedent(
    """\
    id: split
    title: a split test scenario
    difficulty: easy
    instruction: The website is down, please fix it.
    login: web
    hosts:
      - {name: web, role: web}
      - {name: app, role: app}
      - {name: db, role: db, caps: [NET_ADMIN]}
    faults:
      - {type: service_stopped, host: db, params: {service: mariadb}}
    checks:
      - {name: mariadb runs, type: service_running, host: db, params: {service: mariadb}}
    solution: ssh db service mariadb start
    """
)


def load(tmp_path: Path, text: str):
    path = tmp_path / "split.yaml"
    path.write_text(text)
    return load_scenario(path, faults=FAULTS, checks=CHECKS)


# -- schema (no engine) ---------------------------------------------------


def test_roles_give_services_caps_and_login(tmp_path):
    scenario = load(tmp_path, SPLIT)
    assert [h.services for h in scenario.hosts] == [ROLE_SERVICES[r] for r in ("web", "app", "db")]
    assert scenario.hosts[2].caps == ["NET_ADMIN"] and scenario.hosts[0].caps == []
    assert scenario.login_host == "web"
    assert HostSpec(name="x").role == "all" and HostSpec(name="x").services == ROLE_SERVICES["all"]
    assert HostSpec(name="x", role="db", services=["mariadb"]).services == ["mariadb"]
    steady = {(c.host, c.type) for c in scenario.checks if c.name.startswith("steady:")}
    assert ("db", "database_unchanged") in steady and ("web", "database_unchanged") not in steady
    assert ("web", "pages_unchanged") in steady and ("app", "pages_unchanged") not in steady
    official = {c.host: c.params.daemons for c in scenario.checks if c.type == "services_official"}
    assert official == {"web": ["nginx"], "app": ["php-fpm8.2"], "db": ["mariadbd"]}


def test_role_all_keeps_the_steady_state_of_one_host():
    """Scenarios without roles get the gates they always had (no params narrowed)."""
    for scenario in load_catalog().values():
        if all(h.role == "all" for h in scenario.hosts):
            official = [c for c in scenario.checks if c.type == "services_official"]
            assert all(len(c.params.daemons) == 3 for c in official), scenario.id


@pytest.mark.parametrize(
    ("old", "new", "field", "words"),
    [
        ("login: web", "login: www", "login", "no host named 'www'"),
        ("{name: app, role: app}", "{name: app, role: db}", "hosts[2].role", "at most one host per"),
        ("{name: app, role: app}", "{name: app}", "hosts[0].role", "needs a host with role 'app'"),
        ("{name: db, role: db, caps: [NET_ADMIN]}", "{name: db}", "hosts[1].role", "role 'db'"),
        ("caps: [NET_ADMIN]", "caps: [SYS_ADMIN]", "hosts[2].caps[0]", "NET_ADMIN"),
        ("role: db,", "role: cache,", "hosts[2].role", "'all', 'web', 'app' or 'db'"),
        ("{name: app, role: app}", "{name: web, role: app}", "hosts[1].name", "duplicate host name"),
    ],
)
def test_bad_topology_is_one_line_naming_the_field(tmp_path, old, new, field, words):
    assert old in SPLIT
    with pytest.raises(ScenarioError) as err:
        load(tmp_path, SPLIT.replace(old, new))
    message = str(err.value)
    assert "\n" not in message and "split.yaml" in message
    assert field in message and words in message, message


# -- one live 3-host stack --------------------------------------------------


@pytest.fixture(scope="module")
def split_stack(client, images):
    hosts = load_catalog()["split_1"].hosts
    stack = Stack(client, run_id="test-topology", episode_id="test-topology", hosts=hosts, images=images)
    try:
        stack.up()
        yield stack
    finally:
        stack.down()
        remove_labelled(client, run_id="test-topology")


def _programs(stack, name):
    with stack.hosts[name].shell() as shell:
        return set(shell.run("ps -eo comm=").output.split())


@pytest.mark.live
def test_each_host_runs_only_its_role(split_stack):
    web, app, db = (_programs(split_stack, n) for n in ("web", "app", "db"))
    assert "nginx" in web and not {"mariadbd", "php-fpm8.2"} & web
    assert "php-fpm8.2" in app and not {"mariadbd", "nginx"} & app
    assert "mariadbd" in db and not {"nginx", "php-fpm8.2"} & db
    with split_stack.hosts["web"].shell() as shell:
        # disabled at boot, so no restart starts it either; an operator's `service X start` still works
        assert shell.run("ls /etc/rc2.d | grep -c '^S..mariadb'").output.strip() == "0"
        assert shell.run("service php8.2-fpm start && service php8.2-fpm status").ok
        assert shell.run("service php8.2-fpm stop").ok


@pytest.mark.live
def test_the_page_goes_web_to_app_to_db(split_stack):
    page = split_stack.hosts["web"].http_get(80, "/status")
    assert page.status == 200 and b"orders: 10" in page.body, page
    with split_stack.hosts["app"].shell() as shell:
        assert "host = db" in shell.run("cat /etc/shop/app.ini").output
    with split_stack.hosts["db"].shell() as shell:  # MariaDB serves the network, not only its socket
        assert shell.run("ss -Hltn 'sport = :3306'").output.split()[3].startswith(("0.0.0.0", "*"))


@pytest.mark.live
def test_ssh_from_the_login_host_reaches_the_others(split_stack):
    with split_stack.hosts["web"].shell() as shell:
        out = shell.run("ssh -o BatchMode=yes db hostname && ssh -o BatchMode=yes app hostname", timeout=30)
    assert out.ok and out.output.split() == ["db", "app"], out.output


@pytest.mark.live
def test_episode_shells_open_on_named_hosts(split_stack):
    shells = AgentShells(lambda: split_stack.hosts, "web", "ssh")
    try:
        assert shells.run("hostname").output.strip() == "web"
        assert shells("db").run("hostname").output.strip() == "db"
        with pytest.raises(FixOSError, match="no host named 'cache'"):
            shells("cache")
    finally:
        shells.close()


@pytest.mark.live
def test_split_episode_scores_over_exec_and_ssh(client, images, test_run_id, tmp_path):
    """oracle 1.0 and nop 0.0, with the agent's shell on web, over both transports."""
    scenario = load_catalog()["split_1"]
    # the oracle over SSH, nop over exec (the catalogue's live test runs the oracle over exec)
    cases = [("oracle", "ssh"), ("nop", "exec")]
    seeds = {"ssh": 1, "exec": 2}

    def one(case):
        agent, transport = case
        record, _ = run_episode(
            scenario,
            seeds[transport],
            agent,
            client=client,
            images=images,
            run_id=test_run_id,
            transport=transport,
        )
        return record

    with ThreadPoolExecutor(max_workers=len(cases)) as pool:
        records = dict(zip(cases, pool.map(one, cases), strict=True))
    for (agent, transport), record in records.items():
        assert record.status == EpisodeStatus.scored, (agent, transport, record.failure)
        assert record.reward == (1.0 if agent == "oracle" else 0.0), (agent, transport, record.verdict)


def test_external_agent_says_which_host_and_that_ssh_reaches_the_others(tmp_path, capsys):
    workdir = tmp_path / "run" / "split_1-s1-external"
    workdir.mkdir(parents=True)
    (workdir.parent / VERIFY_REQUEST).touch()  # as `fixos verify RUN_ID` asks: returns at once
    endpoints = Endpoints("ssh -p 1 root@127.0.0.1", "docker exec -it x bash -l", "k", "web", ["app", "db"])
    task = Task("split_1", "The site is down.", 5, 5.0, workdir, endpoints)
    ExternalAgent(poll=0.01).solve(task, None)  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert "log you in on 'web'" in out and "(app, db)" in out and "ssh db" in out, out
