"""A plain grep's run of lines (parser.PlainRun) as `grep` prints it, in one piece.

Why here and not line by line in verbs/grep.py: at tens of thousands of lines a second the
per-line work was most of grep's CPU. A run whose lines are all printable ASCII (a server's
lines, nearly always) is written as it is, and its JSON lines are joined from constant pieces
(such a line needs no escaping); any other run goes line by line. The text is exactly what
`verbs/grep._match_text` gives for each line's PlainMatch (tests/unit/test_grep_runs.py).
"""

from __future__ import annotations

from itertools import chain, repeat
from json.encoder import encode_basestring_ascii as _quote

from specdebug.core.logs.parser import PlainRun
from specdebug.core.sanitize import visible

# verbs/grep._match_text's JSON of a plain match without fields, around its offset and its line
_HEAD, _MID = '{"offset": ', ', "event": "match", "line": '
_TAIL = ', "fields": {}, "metrics": {}, "warmup": false}\n'


def run_text(run: PlainRun, as_json: bool) -> str:
    """The run's output lines, each ending in a newline: one JSON object per line, or the line
    with control characters shown (`visible`)."""
    joined = "".join(run.lines)
    printable = joined.isascii() and joined.isprintable()  # (space to ~: nothing to show or escape)
    if as_json:
        if printable and '"' not in joined and "\\" not in joined:
            quoted: list[str] = run.lines
            q = '"'
        else:
            quoted, q = list(map(_quote, run.lines)), ""
        return "".join(
            chain.from_iterable(
                zip(repeat(_HEAD), map(str, run.offsets()), repeat(_MID + q), quoted, repeat(q + _TAIL))
            )
        )
    if printable:
        return "\n".join(run.lines) + "\n"
    return "".join(visible(line, newlines=False) + "\n" for line in run.lines)
