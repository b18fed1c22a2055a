"""One fingerprint of a server config, the same value everywhere it is shown or compared.

`profile check`, a launch's verdict, every benchmark result and bisection's trial cache all name a
config by this value, so "these two runs were the same experiment" means one thing.  It hashes the
*knobs* of the config: the command prefix, each CLI flag with its values, each env var, the
engine kind, and the working directory the server runs from (two worktrees are two sources: the
same flags from another checkout are another experiment; issue 23).  Placement is left out
(PLUMBING_FLAGS: where the server listens or logs; the profile's name, port and log file), and so
is the order of flags: `--a 1 --b 2` and `--b 2 --a 1` start the same server.  The server's version
and the commit its cwd holds are read on the box at launch and recorded beside it (core/source.py),
not in here: a fingerprint must be known before the server runs (bisection caches by it before
launching).  A config without a cwd hashes as it always did.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

from specdebug.engines import DEFAULT_ENGINE

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
    command: list[str],
    flags: Iterable[tuple[str, list[str]]],
    env: Mapping[str, str],
    kind: str,
    cwd: str | None = None,
) -> str:
    """The hash of already split knobs (plumbing flags are dropped here, whoever calls)."""
    knobs: dict[str, object] = {
        "command": list(command),
        "flags": sorted([name, list(values)] for name, values in flags if name not in PLUMBING_FLAGS),
        "env": sorted(env.items()),
        "kind": kind,
    }
    where = normal_cwd(cwd)
    if where is not None:  # only when set: fingerprints of configs without one stay as they were
        knobs["cwd"] = where
    blob = json.dumps(knobs, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:LENGTH]


def normal_cwd(cwd: str | None) -> str | None:
    """`~/wt/a/` and `~/wt/a` are one folder; an empty cwd is none."""
    if not cwd:
        return None
    return cwd.rstrip("/") or "/"


def config_fingerprint(
    argv: list[str], env: Mapping[str, str], kind: str = DEFAULT_ENGINE, cwd: str | None = None
) -> str:
    """Fingerprint of a launch config given as argv + env + cwd (what a profile's [server] holds)."""
    command, flags = split_argv(list(argv))
    return knob_fingerprint(command, flags, env, kind, cwd)


WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]", "*")


def server_host(argv: list[str]) -> str:
    """The address on the box a server started with `argv` answers at: its `--host` (SGLang's and
    vLLM's bind address), 127.0.0.1 for none, a wildcard or localhost.  Health checks, forwards and
    the benchmark ask there: a node bound to 127.0.0.3 answers nobody at 127.0.0.1 (issue 41)."""
    _, flags = split_argv(argv)
    host = next((values[0] for name, values in reversed(flags) if name == "--host" and len(values) == 1), "")
    host = host.strip()
    return "127.0.0.1" if host in WILDCARD_HOSTS or host == "localhost" else host.strip("[]")


def url_host(host: str) -> str:
    """`host` as it goes in a URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host
