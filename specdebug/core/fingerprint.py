"""One fingerprint of a server config, the same value everywhere it is shown or compared.

`profile check`, a launch's verdict, every benchmark result and bisection's trial cache all name a
config by this value, so "these two runs were the same experiment" means one thing.  It hashes the
*knobs* of the config: the command prefix, each CLI flag with its values, each env var, and the
engine kind.  Placement is left out (PLUMBING_FLAGS: where the server listens or logs; the profile's
name, port, log file and working directory), and so is the order of flags: `--a 1 --b 2` and
`--b 2 --a 1` start the same server.  The server's version is recorded beside results, not in here:
a fingerprint must be known before the server runs (bisection caches by it before launching).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

# Flags that say where a server listens or logs, not how it behaves: two profiles that differ only
# here are the same experiment, so fingerprints and diffs leave them out (diff shows them on request).
PLUMBING_FLAGS = frozenset({"--port", "--host", "--log-file"})
LENGTH = 12


def split_argv(argv: list[str]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """Split argv into the command prefix and (flag, values) pairs.

    The prefix runs up to the first `--flag` (so `python3 -m sglang.launch_server` and
    `vllm serve MODEL` stay whole).  `--flag=value` and `--flag v1 v2` both work; a flag
    followed by another flag or the end is a switch.  A repeated flag keeps its last value.
    """
    i = 0
    while i < len(argv) and not argv[i].startswith("--"):
        i += 1
    prefix = argv[:i]
    flags: dict[str, list[str]] = {}
    while i < len(argv):
        tok = argv[i]
        i += 1
        if "=" in tok and tok.startswith("--"):
            name, _, value = tok.partition("=")
            flags.pop(name, None)
            flags[name] = [value]
            continue
        values: list[str] = []
        while i < len(argv) and not argv[i].startswith("--"):
            values.append(argv[i])
            i += 1
        flags.pop(tok, None)
        flags[tok] = values
    return prefix, list(flags.items())


def knob_fingerprint(
    command: list[str], flags: Iterable[tuple[str, list[str]]], env: Mapping[str, str], kind: str
) -> str:
    """The hash of already split knobs (plumbing flags are dropped here, whoever calls)."""
    blob = json.dumps(
        {
            "command": list(command),
            "flags": sorted([name, list(values)] for name, values in flags if name not in PLUMBING_FLAGS),
            "env": sorted(env.items()),
            "kind": kind,
        },
        separators=(",", ":"),
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:LENGTH]


def config_fingerprint(argv: list[str], env: Mapping[str, str], kind: str = "sglang") -> str:
    """Fingerprint of a launch config given as argv + env (what a profile's [server] holds)."""
    command, flags = split_argv(list(argv))
    return knob_fingerprint(command, flags, env, kind)
