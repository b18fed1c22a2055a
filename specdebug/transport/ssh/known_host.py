"""Is a bare word a host the user could mean?  Asked before a word close to a verb is called a typo.

Stdlib only and cheap (the CLI asks it before any heavy import): an ssh config `Host` pattern
that names the word (Include followed), or a resolver that knows it (/etc/hosts, DNS), with a
short bound so a slow resolver cannot hold up the answer.
"""

from __future__ import annotations

import concurrent.futures
import fnmatch
import glob
import socket
from pathlib import Path

RESOLVE_TIMEOUT_S = 2.0
_MAX_INCLUDES = 16


def host_is_known(word: str, ssh_config: str | None) -> bool:
    return named_in_ssh_config(word, ssh_config) or resolves(word)


def named_in_ssh_config(word: str, ssh_config: str | None) -> bool:
    """A `Host` pattern other than a bare wildcard matches `word` (a `Host *` block names nobody)."""
    path = Path(ssh_config).expanduser() if ssh_config else Path("~/.ssh/config").expanduser()
    return _names(path, word, set())


def _names(path: Path, word: str, seen: set[Path]) -> bool:
    if path in seen or len(seen) >= _MAX_INCLUDES:
        return False
    seen.add(path)
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    for raw in text.splitlines():
        key, _, value = raw.strip().replace("=", " ", 1).partition(" ")
        words = value.split()
        if key.lower() == "host" and _matches(words, word):
            return True
        if key.lower() == "include":
            for pattern in words:
                full = Path(pattern).expanduser()
                full = full if full.is_absolute() else Path("~/.ssh").expanduser() / full
                if any(_names(Path(p), word, seen) for p in sorted(glob.glob(str(full)))):
                    return True
    return False


def _matches(patterns: list[str], word: str) -> bool:
    hit = False
    for pat in patterns:
        if pat.startswith("!"):
            if fnmatch.fnmatch(word, pat[1:]):
                return False
        elif pat.strip("*?") and fnmatch.fnmatch(word, pat):
            hit = True
    return hit


def resolves(word: str) -> bool:
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        pool.submit(socket.getaddrinfo, word, None).result(timeout=RESOLVE_TIMEOUT_S)
    except (OSError, UnicodeError, concurrent.futures.TimeoutError):
        return False
    finally:
        pool.shutdown(wait=False)
    return True
