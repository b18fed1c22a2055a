#!/usr/bin/env bash
# The real-engine tier: install (or reuse) the pinned vLLM CPU build, then drive every verb against it.
# Run from the checkout after the README's test command made .venv:  bash tests/real/run.sh [pytest args]
# One process (-n 0): a real vLLM takes both cores at each start; the tests share one server a module.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="$(bash tests/real/install.sh | tail -n 1)"
export SPECDEBUG_VLLM_VENV="$venv" SPECDEBUG_REAL_ENGINE=1
exec .venv/bin/python -m pytest -q -n 0 -p no:cacheprovider tests/real "$@"
