#!/usr/bin/env bash
# The whole suite beside busy loops, several runs in a row (issue 41: a user's laptop is often this
# busy; a test that fails here must be a real fault, not a clock).  Prints each run's result line and
# wall time, and stops at the first red run.  The loops are this script's own children, killed on exit.
#   usage: bash tests/busy_suite.sh [LOOPS (8)] [RUNS (3)] [extra pytest args...]
set -uo pipefail
cd "$(dirname "$0")/.."
loops="${1:-8}"
runs="${2:-3}"
shift $(( $# > 2 ? 2 : $# ))
pids=()
cleanup() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null; }
trap cleanup EXIT INT TERM
for _ in $(seq "$loops"); do
    sh -c 'while :; do :; done' &
    pids+=("$!")
done
echo "busy loops: $loops (pids ${pids[*]}); load now: $(cut -d' ' -f1-3 /proc/loadavg)"
for run in $(seq "$runs"); do
    start=$(date +%s)
    log="$(mktemp)"
    .venv/bin/python -m pytest -q "$@" >"$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    echo "run $run: exit $rc in ${took}s (load $(cut -d' ' -f1-3 /proc/loadavg)): $(tail -n 1 "$log")"
    if [ "$rc" -ne 0 ]; then
        grep -E '^(FAILED|ERROR)' "$log" | head -n 20
        echo "full output: $log"
        exit "$rc"
    fi
    rm -f "$log"
done
