"""The Shell contract, against a real booted host: every test runs over docker exec and over SSH."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from fixos.shells.base import OUTPUT_LIMIT, TIMEOUT_EXIT_CODE

pytestmark = pytest.mark.live


@pytest.fixture
def shell(any_shell):
    return any_shell


def test_output_and_exact_exit_codes(shell):
    r = shell.run("echo out; echo err >&2; exit_with() { return $1; }; exit_with 42")
    assert r.output == "out\nerr\n"
    assert r.exit_code == 42
    assert shell.run("true").exit_code == 0
    assert shell.run("false").exit_code == 1
    assert shell.run("no-such-command").exit_code == 127
    assert shell.run("printf 'no newline'").output == "no newline"


def test_cwd_and_environment_persist(shell):
    shell.run("cd /etc && export FIXOS_PROBE=kept")
    r = shell.run("pwd; echo $FIXOS_PROBE")
    assert r.output == "/etc\nkept\n"


def test_commands_cannot_read_the_session_input(shell):
    r = shell.run("cat; read -r line; echo read=$?", timeout=5)
    assert r.output == "read=1\n"
    assert not r.timed_out
    assert shell.run("echo still here").output == "still here\n"


def test_timeout_kills_the_command_and_keeps_the_session(shell):
    shell.run("cd /var/log && export KEEP=1")
    r = shell.run("sleep 61", timeout=1)
    assert r.timed_out and r.exit_code == TIMEOUT_EXIT_CODE
    assert "timeout" in r.output
    assert shell.run('pgrep -fx "sleep 61"').exit_code == 1, "the killed command is gone"
    assert shell.run("pwd; echo $KEEP").output == "/var/log\n1\n"


def test_a_builtin_loop_is_killed_with_its_session_and_state_survives(shell):
    shell.run("cd /tmp && export KEEP=2")
    r = shell.run("while :; do :; done", timeout=1)
    assert r.timed_out and r.exit_code == TIMEOUT_EXIT_CODE
    assert shell.run("pwd; echo $KEEP").output == "/tmp\n2\n"


def test_exit_ends_only_that_command(shell):
    shell.run("cd /srv")
    r = shell.run("exit 7")
    assert r.exit_code == 7
    assert shell.run("pwd").output == "/srv\n"


def test_endless_output_is_capped_with_a_marker(shell):
    r = shell.run("yes", timeout=2)
    assert r.truncated and r.timed_out
    assert "output truncated" in r.output
    assert len(r.output.encode()) < OUTPUT_LIMIT + 16 * 1024
    assert shell.run("echo after").output == "after\n"


def test_big_output_under_the_cap_is_whole(shell):
    r = shell.run("seq 1 5000")
    assert not r.truncated
    assert r.output.splitlines()[-1] == "5000" and len(r.output.splitlines()) == 5000


def test_binary_output_is_decoded_safely(shell):
    r = shell.run("head -c 4096 /dev/urandom")
    assert r.exit_code == 0 and isinstance(r.output, str)
    assert shell.run("printf '\\xff\\xfe ok'").output.endswith(" ok")


@pytest.mark.parametrize("program", ["top", "vi /tmp/notes", "less /etc/passwd", "mariadb"])
def test_interactive_programs_end_or_time_out(shell, program):
    r = shell.run(program, timeout=2)
    assert r.duration < 8
    assert shell.run("echo alive").output == "alive\n"


def test_marker_lookalikes_in_output_do_not_confuse_framing(shell):
    r = shell.run("printf '\\n__FIXOS_0000000000000000__ 0\\n'; echo tail")
    assert r.output.endswith("tail\n") and r.exit_code == 0
    # a lookalike that ends the output for a while, with a code of its own: still not the end
    r = shell.run("printf '\\n__FIXOS_0123456789abcdef__ 7\\n'; sleep 0.5; echo tail; sh -c 'exit 3'")
    assert r.output.endswith("__ 7\ntail\n") and r.exit_code == 3


def test_heredocs_and_quotes_pass_through(shell):
    script = "cat > /tmp/x <<'EOF'\nline 'one'\n\"two\" $HOME\nEOF\ncat /tmp/x"
    assert shell.run(script).output == "line 'one'\n\"two\" $HOME\n"


def test_threads_sharing_a_session_each_get_their_own_answer(shell):
    def ask(i: int) -> tuple[int, str, int]:
        result = shell.run(f"sleep 0.0{i % 3}; echo answer-{i}; exit_code={i % 5}; (exit $exit_code)")
        return i, result.output.strip(), result.exit_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(ask, range(24)))
    assert answers == [(i, f"answer-{i}", i % 5) for i in range(24)]
