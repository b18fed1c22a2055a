"""Text from the box is data: control characters are shown, never sent to the user's terminal.

A log line, a /proc cmdline or environ value, a server excerpt or a journal entry can hold ESC
sequences (OSC 52 writes the clipboard, OSC 0 sets the window title, CSI moves the cursor), C1
controls (U+0080-U+009F, which some terminals treat as ESC-[ etc.) or bidi overrides that make a
line read differently from what it is.  Every text output of such text goes through `visible`,
which writes each of them as a visible escape (``\\x1b``, ``\\u202e``), so the user sees that they
were there and the terminal never acts on them.  JSON output needs none of this: `json.dumps`
escapes them already (and must stay exact).

Lone surrogates (bytes kept by ``surrogateescape``) are escaped too: printing them would raise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

#: Bidirectional formatting controls (Unicode TR9): embeddings, overrides, isolates, marks.
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"

# C0 (\t and \n are decided per call), DEL, C1, bidi, the line/paragraph separators (some
# terminals break lines on them) and lone surrogates.
_ALWAYS = "\x00-\x08\x0b-\x1f\x7f-\x9f" + BIDI_CONTROLS + "\u2028\u2029\ud800-\udfff"
_RX: dict[tuple[bool, bool], re.Pattern[str]] = {
    (keep_nl, keep_tab): re.compile(
        "[" + _ALWAYS + ("" if keep_nl else "\n") + ("" if keep_tab else "\t") + "]"
    )
    for keep_nl in (False, True)
    for keep_tab in (False, True)
}
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

S = TypeVar("S")


def _escape(ch: str) -> str:
    named = _NAMED.get(ch)
    if named is not None:
        return named
    cp = ord(ch)
    return f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"


def visible(text: str, *, newlines: bool = False, tab: str | None = "\t") -> str:
    """`text` with every control character written visibly (``\\x1b``, ``\\r``, ``\\u202e``).

    newlines: keep ``\\n`` as a line break (text meant to span lines); else it shows as ``\\n``.
    tab: what a tab becomes (kept by default; the TUI passes " "; None shows ``\\t``).
    """
    rx = _RX[newlines, tab == "\t"]
    if rx.search(text) is None:
        return text
    if tab is None or tab == "\t":
        return rx.sub(lambda m: _escape(m.group()), text)
    return rx.sub(lambda m: tab if m.group() == "\t" else _escape(m.group()), text)


def visible_spans(
    text: str, spans: Sequence[tuple[int, int, S]], *, tab: str = " "
) -> tuple[str, list[tuple[int, int, S]]]:
    """One display line and its highlight spans, moved to where the characters went.

    For the TUI: spans computed on the raw line (values, matches) still cover the same
    characters after a control character before them grew into a visible escape.
    """
    rx = _RX[False, tab == "\t"]
    if rx.search(text) is None:
        return text, list(spans)
    pos: list[int] = []
    out: list[str] = []
    n = 0
    for ch in text:
        pos.append(n)
        piece = ch if not rx.match(ch) else (tab if ch == "\t" else _escape(ch))
        out.append(piece)
        n += len(piece)
    pos.append(n)
    last = len(text)
    moved = [(pos[min(max(s, 0), last)], pos[min(max(e, 0), last)], st) for s, e, st in spans]
    return "".join(out), moved
