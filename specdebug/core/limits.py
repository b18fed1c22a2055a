"""Bounds that hold on any input: line length, input size, user-regex time.

Text from the box (log lines, excerpts) and what we store of it (journal events) is cut at
MAX_LINE; the cut is always visible (a flag or a marker), never silent. One module so the
follower, scan, excerpts and the journal agree on the numbers.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

from specdebug.errors import SpecdebugError

MAX_LINE = 64 * 1024  # bytes of one log line kept; the rest is cut and the line marked truncated
USER_REGEX_TIMEOUT_S = 1.0  # one search of a user pattern (profile [patterns], grep -e) over one line
BOX_REGEX_TIMEOUT_S = 1.0  # the on-box filter: one user regex over one block of up to MAX_LINE bytes
MAX_PARSE_INPUT = 32 * 1024 * 1024  # `bench --parse` reads at most this much (its tail) of a file


def cap_bytes(data: bytes, limit: int = MAX_LINE) -> tuple[bytes, int | None]:
    """(kept, full length or None): lines longer than `limit` keep their first `limit` bytes."""
    if len(data) <= limit:
        return data, None
    return data[:limit], len(data)


def cap_text(text: str, limit: int = MAX_LINE) -> str:
    """`text` cut to `limit` characters with a visible note of how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters cut]"


def truncation_note(kept: int, full: int) -> str:
    return f"[line cut at {kept} of {full} bytes]"


_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
}


class NotRegularFile(OSError, SpecdebugError):
    """A path that is not a regular file: reading it could block forever (FIFO) or never end (/dev/zero)."""


def file_kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def open_regular_file(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a local file for reading, refusing anything that is not a regular file (say what it is).

    O_NONBLOCK keeps the open of a FIFO from waiting for a writer; the check is on the opened fd,
    so a path swapped in between cannot slip through."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(errno.EINVAL, f"{file_kind(mode)}, not a regular file: refusing to read it")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
