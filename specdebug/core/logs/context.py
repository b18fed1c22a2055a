"""Jump from a matched line to its surroundings: +-N lines read from the box around an offset.

One `read_file` round trip with a window around the offset; the pure part (cutting lines out of
the window) is separate so it can be tested without a box.
"""

from __future__ import annotations

from specdebug.core.model import Model
from specdebug.remote.api import Remote

WINDOW = 64 * 1024


class ContextLine(Model):
    offset: int
    text: str
    target: bool = False


def context_from_bytes(
    data: bytes, start: int, offset: int, before: int = 20, after: int = 20
) -> list[ContextLine]:
    """Lines of `data` (which begins at file offset `start`) around the line starting at `offset`.

    A first line cut by the window start is dropped; so is a last line cut by the window end,
    unless it is the target itself."""
    rel = offset - start
    if rel < 0 or rel > len(data):
        return []
    head = data[:rel]
    pre = head.split(b"\n")
    pre.pop()  # the (empty) piece after the newline that ends the line before the target
    if start > 0 and pre:
        pre.pop(0)  # cut by the window
    pre = pre[-before:] if before else []
    lines: list[ContextLine] = []
    pos = rel - sum(len(p) + 1 for p in pre)
    for p in pre:
        lines.append(ContextLine(offset=start + pos, text=p.decode("utf-8", "replace")))
        pos += len(p) + 1
    tail = data[rel:]
    post = tail.split(b"\n")
    complete = tail.endswith(b"\n")
    if complete:
        post.pop()
    pos = rel
    for i, p in enumerate(post[: after + 1]):
        if i == len(post) - 1 and not complete and i > 0:
            break  # cut by the window end (or a line still being written)
        lines.append(ContextLine(offset=start + pos, text=p.decode("utf-8", "replace"), target=(i == 0)))
        pos += len(p) + 1
    return lines


async def read_context(
    remote: Remote, path: str, offset: int, *, before: int = 20, after: int = 20, window: int = WINDOW
) -> list[ContextLine]:
    """+-before/after lines around the line at `offset` of `path` on the box (one round trip)."""
    start = max(0, offset - window)
    data = await remote.read_file(path, offset=start, max_bytes=(offset - start) + window)
    return context_from_bytes(data, start, offset, before, after)
