"""Lines read from the box with a bound: no line is held whole past a limit, whatever the box sends.

asyncssh's readline keeps reading until it sees a newline, so one 300 MB line (a server printing
without newlines, a hostile tool) would be held whole.  Here a reader's `read(n)` feeds a buffer
that never grows past the limit: a longer line is cut there (the rest up to its newline dropped
and counted) or refused, as the caller chooses.
"""

from __future__ import annotations

from typing import Any

from specdebug.errors import SpecdebugError

CHUNK = 1 << 16


class LineTooLong(SpecdebugError):
    """A line longer than the limit where the caller refuses them (a broken protocol)."""


class BoundedLines:
    """`readline()` over any object with an async `read(n)` (an asyncssh stream reader)."""

    def __init__(self, reader: Any, limit: int, *, refuse: bool = False) -> None:
        self._reader = reader
        self.limit = limit
        self._refuse = refuse
        self._buf = bytearray()
        self._scanned = 0  # bytes of the buffer already searched for a newline
        self._eof = False
        self.cut_lines = 0  # lines cut at the limit
        self.dropped_bytes = 0  # bytes of those lines past the limit, dropped

    async def _fill(self) -> bool:
        data: bytes = await self._reader.read(CHUNK)
        if not data:
            self._eof = True
            return False
        self._buf += data
        return True

    async def readline(self) -> bytes:
        """The next line with its newline; the last one may lack it; b"" at the end."""
        while True:
            cut = self._buf.find(b"\n", self._scanned, self.limit + 1)
            if cut >= 0:
                line = bytes(self._buf[: cut + 1])
                del self._buf[: cut + 1]
                self._scanned = 0
                return line
            self._scanned = min(len(self._buf), self.limit + 1)
            if len(self._buf) > self.limit:
                if self._refuse:
                    raise LineTooLong(f"a line of more than {self.limit} bytes")
                line = bytes(self._buf[: self.limit])
                del self._buf[: self.limit]
                self._scanned = 0
                await self._skip_rest()
                return line + b"\n"
            if self._eof or not await self._fill():
                line = bytes(self._buf)
                self._buf.clear()
                self._scanned = 0
                return line

    async def _skip_rest(self) -> None:
        """Drop what is left of a cut line, up to and including its newline."""
        self.cut_lines += 1
        while True:
            cut = self._buf.find(b"\n")
            if cut >= 0:
                self.dropped_bytes += cut
                del self._buf[: cut + 1]
                return
            self.dropped_bytes += len(self._buf)
            self._buf.clear()
            if self._eof or not await self._fill():
                return
