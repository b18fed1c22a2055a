"""Find the optional C libraries asyncssh asks for without the subprocesses ctypes would run.

asyncssh looks up liboqs (post-quantum key exchange) and libnettle (UMAC) with ctypes.util.find_library
while it is imported; on Linux that runs `ldconfig -p`, then `gcc` and `ld` for each name not found: seven
processes, a good part of a cold `specdebug probe`.  For those names only, `install()` answers from the
loader's usual folders (the same file the loader would open by its soname); every other name goes to
ctypes as before.
"""

from __future__ import annotations

import ctypes.util
import glob
import os
from collections.abc import Callable

ASKED_BY_ASYNCSSH = frozenset({"oqs", "liboqs", "nettle", "libnettle", "libnettle-6"})
_FOLDERS = (
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
)


def find_in_folders(name: str) -> str | None:
    """The soname file of lib<name> in the loader's folders (and LD_LIBRARY_PATH), or None."""
    stem = name[3:] if name.startswith("lib") else name
    folders = [*os.environ.get("LD_LIBRARY_PATH", "").split(":"), *_FOLDERS]
    for folder in filter(None, folders):
        found = sorted(glob.glob(os.path.join(glob.escape(folder), f"lib{glob.escape(stem)}.so.*")))
        versioned = [f for f in found if f.count(".so.") == 1]
        if versioned:
            return os.path.basename(min(versioned, key=len))  # libnettle.so.8 before libnettle.so.8.6
    return None


def install() -> None:
    """Answer asyncssh's names from the folders; idempotent."""
    original: Callable[[str], str | None] = ctypes.util.find_library
    if getattr(original, "specdebug_fast", False):
        return

    def find_library(name: str) -> str | None:
        return find_in_folders(name) if name in ASKED_BY_ASYNCSSH else original(name)

    find_library.specdebug_fast = True  # type: ignore[attr-defined]
    ctypes.util.find_library = find_library
