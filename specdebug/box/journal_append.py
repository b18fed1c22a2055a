"""Append one whole record to a journal file ON THE BOX (`python3 -c SOURCE PATH`, record on stdin).

Two specdebug instances share a box journal; each record must land as one whole line.  One
`write` on an O_APPEND descriptor, then fsync; a torn tail left by a writer killed mid-line is
ended with a newline first, so the new record starts on its own line.  Exit 5: short write.
Stdlib only, Python >= 3.7.
"""

from __future__ import annotations

import os
import sys


def append_record(path: str, data: bytes) -> bool:
    """Append `data` in one write (False: the write was short)."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        size = os.fstat(fd).st_size
        if size:
            r = os.open(path, os.O_RDONLY)
            try:
                if os.pread(r, 1, size - 1) != b"\n":
                    data = b"\n" + data
            finally:
                os.close(r)
        if os.write(fd, data) != len(data):
            return False
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def main() -> None:
    if not append_record(sys.argv[1], sys.stdin.buffer.read()):
        sys.exit(5)


if __name__ == "__main__":
    main()
