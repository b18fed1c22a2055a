"""The client side of the on-box follow agent (specdebug/box/follow.py) and the record format it speaks.

Why an agent instead of `tail -c +N -F PATH | grep -E --line-buffered`: exact byte offsets (resume
after a reconnect with no line lost or repeated), Python's regex dialect on both sides, and
truncation/rotation reported as records. Records, one per output line:

  OFFSET<TAB>LINE                a selected line (no newline in it by construction, <= MAX_LINE bytes)
  T<OFFSET> <LENGTH><TAB>LINE    a selected line longer than MAX_LINE: LINE is its first MAX_LINE bytes
  !RUN<TAB>OFFSET<TAB>N          the next N output lines are N consecutive selected lines of the
                                 file, as they are (the first at OFFSET): no per-line framing work
  !KIND<TAB>FIELD...             control; any field that could hold arbitrary bytes (a path, an
                                 error text) is base64, so no path or line content can break framing

Bounds: a line is cut at MAX_LINE (memory stays bounded on a 1 GB line or a sparse file); only
regular files are opened (a FIFO or device would block or never end); every regex pass over a
block runs under an interval timer and a pattern that overruns it is dropped and named (`!CUT`);
a pattern matching the empty string cannot stall the filter loop. Selection is exact per line (a
match running across a newline is checked again on its line alone), so a client that needs no
named groups can trust it without searching again. Truncation is detected by size
and, for a file that was truncated and grew again past our offset, by checking that the bytes
before the read position are still the ones read (`check` = crc32 of the TAILK bytes before an
offset; the client hands it back on resume).
Modes: follow (forever), once (to EOF, then exit), poll,WAIT,MAX (up to MAX bytes, waiting up to
WAIT s for data; used through the probe channel when no SSH session is free).  Follow and once take
`,ack,WINDOW`: acknowledged flow control (box/follow.py says why), the client acking on stdin.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from specdebug.core.limits import BOX_REGEX_TIMEOUT_S, MAX_LINE
from specdebug.core.logs.parser import strip_named_groups
from specdebug.remote.boxcode import source

POLL_WAIT_S = 2.0
POLL_MAX_BYTES = 4 << 20
ACK_WINDOW = 4 << 20  # bytes of agent output in flight, unacknowledged, at most (plus one block)
_META = re.compile(r"[.^$*+?{}\[\]\\|()]")

# The agent itself runs on the box (specdebug/box/follow.py, python3 -I -S, stdlib only); this
# client's limits and the flow control (box/follow_flow.py, as a module) go in to its entry point.
AGENT = (
    source("follow.py")
    + "\nimport types as _types\n_flow = _types.ModuleType('follow_flow')\n"
    + f"exec(compile({source('follow_flow.py')!r}, '<specdebug.box.follow_flow>', 'exec'), _flow.__dict__)\n"
    + f"run({MAX_LINE!r}, {BOX_REGEX_TIMEOUT_S!r}, _flow.Flow)\n"
)


def split_prefilter(prefilter: Sequence[str]) -> tuple[list[str], list[str]]:
    """(literals found with bytes.find, regexes) of a prefilter; named groups are dropped from regexes
    so the agent can OR them into one pattern."""
    lits = [p for p in dict.fromkeys(prefilter) if p and not _META.search(p)]
    regexes = [p for p in dict.fromkeys(prefilter) if not p or _META.search(p)]
    return lits, regexes


def agent_argv(
    path: str,
    offset: int | None,
    inode: int | None,
    prefilter: Sequence[str],
    once: bool = False,
    check: str | None = None,
    poll: tuple[float, int] | None = None,
    ack: int = 0,
) -> list[str]:
    """argv of the on-box follower. offset None = from the end (start of the last complete line);
    once = read to the end of the file and exit (grep without --follow); poll = (wait s, max bytes);
    ack = the flow-control window in bytes (0: none; the agent then must not read stdin)."""
    lits, regexes = split_prefilter(prefilter)
    pats = [f"={p}" for p in lits] + [f"~{strip_named_groups(p)}" for p in regexes]
    if poll is not None:
        mode = f"poll,{poll[0]:g},{poll[1]}"
    else:
        mode = ("once" if once else "follow") + (f",ack,{ack}" if ack > 0 else "")
    return [
        "python3",
        "-I",
        "-S",
        "-c",
        AGENT,
        path,
        str(-1 if offset is None else offset),
        str(inode or 0),
        mode,
        check or "-",
        *pats,
    ]


def tail_argv(path: str, offset: int) -> list[str]:
    return ["tail", "-c", f"+{offset + 1}", "-F", path]
