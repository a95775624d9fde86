# Sourced by the set-up scripts (ensure-engine, ensure-venv, ensure-browser,
# ensure-compose): set-up prints only `[setup]` lines; the package tools' own output
# (apt-get, pip, mkfs, needrestart) goes to one log, FIXOS_SETUP_LOG (default
# results/setup.log under the repository, where `make` runs; `fixos setup` writes
# its image builds to the same file: fixos.stack.setup_log). A failing step prints
# one line naming the step and the log, then the last lines the step wrote there.
SETUP_LOG=${FIXOS_SETUP_LOG:-results/setup.log}
SETUP_TAIL=20
mkdir -p "$(dirname "$SETUP_LOG")"
SETUP_LOG=$(realpath "$SETUP_LOG")  # the same file after a cd
# kept bounded: past 4 MB the old log becomes setup.log.1
if [ "$(stat -c %s "$SETUP_LOG" 2>/dev/null || echo 0)" -gt 4194304 ]; then
    mv -f "$SETUP_LOG" "$SETUP_LOG.1"
fi
# apt's needrestart would scan every process after each install and print what it found
export NEEDRESTART_SUSPEND=1 NEEDRESTART_MODE=a DEBIAN_FRONTEND=noninteractive
_setup_mark=0

say() { printf '[setup] %s\n' "$*"; }

# logged STEP COMMAND...: COMMAND with its output appended to the log under a header
# naming the step; its status is returned. fail names the last step logged.
logged() {
    local step=$1
    shift
    _setup_mark=0
    [ -f "$SETUP_LOG" ] && _setup_mark=$(wc -l <"$SETUP_LOG")
    printf '=== %s %s: %s\n' "$(date -u +%FT%TZ)" "$step" "$*" >>"$SETUP_LOG"
    "$@" >>"$SETUP_LOG" 2>&1 </dev/null
}

# fail STEP PROBLEM [LOG]: one line on stderr naming the step, the problem and the log,
# then the last lines written since the step began (pip repeats a warning per package
# when the machine's pip configuration names missing folders: left out here, not from
# the log), and exit 1. LOG: another log to show (dockerd's own).
fail() {
    local step=$1 problem=$2 log=${3:-$SETUP_LOG} from=1
    [ "$log" = "$SETUP_LOG" ] && from=$((_setup_mark + 1))
    {
        printf 'fixos setup: %s failed: %s; its output is in %s, its last lines:\n' "$step" "$problem" "$log"
        tail -n "+$from" "$log" 2>/dev/null | grep -v "is ignored: it is neither a file nor a directory" \
            | tail -n "$SETUP_TAIL" | sed 's/^/    /' || true
    } >&2
    exit 1
}
