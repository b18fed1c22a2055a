"""A plain grep's runs of lines (follow.RawRun -> parser.PlainRun -> runtext) against line by line.

`grep -e X` prints the lines the box selected; issue 43 found every one of them going through the
parser, the scrubber and the formatter one by one (3.4-9x the client CPU of ssh + grep). Runs are
checked and printed as blocks; here the output must be exactly what the per-line path prints for
each line (text and JSON), and lines the per-line path would change (a secret, ESC, CR, a control
character, broken UTF-8, an overlong line) must come out as it makes them.
"""

from __future__ import annotations

import pytest

from specdebug.core.limits import MAX_LINE
from specdebug.core.logs.follow import Follower, RawLine, RawRun
from specdebug.core.logs.parser import LogParser, PlainRun
from specdebug.core.secrets import Scrubber
from specdebug.verbs.grep import _match_text

DECODE = (
    b"[2026-01-15 12:00:03 TP0] Decode batch, #running-req: 16, #token: 150000, token usage: 0.41, "
    b"accept len: 2.95, accept rate: 0.74, cuda graph: True, gen throughput (token/s): 310.40, #queue-req: 0"
)
ODD = [
    b"Decode batch api_key=sk-abcdef123456 here",  # a secret: masked, and learned for later lines
    b"Decode batch and sk-abcdef123456 again",
    b"Decode batch \x1b]52;c;aGk=\x07 clipboard",
    b"Decode batch with CR\r",
    b"Decode batch \x01 control \xe2\x80\xae bidi",
    b"Decode batch broken \xff\xfe utf-8",
    b"Decode batch\ttab",
    b"Decode batch back\\slash",
    b'Decode batch "quoted"',
    "Decode batch caf\u00e9 \u4e2d".encode(),
    b"Decode batch " + b"x" * (MAX_LINE + 5),
    b"",
]


def per_line(lines: list[bytes], at: int, as_json: bool, scrub: Scrubber) -> str:
    parser = LogParser("none", grep=["Decode batch"], scrub=scrub)
    out = []
    for data in lines:
        m = parser.parse(data, at, None, 7, None, True)
        assert m is not None
        out.append(_match_text(m, as_json))
        at += len(data) + 1
    return "".join(out)


def as_runs(lines: list[bytes], at: int, as_json: bool, scrub: Scrubber) -> tuple[str, int]:
    parser = LogParser("none", grep=["Decode batch"], scrub=scrub)
    assert parser.takes_runs()
    items = parser.parse_batch([RawRun(at, lines, 7)], preselected=True)
    text = "".join(_match_text(m, as_json) for m in items)  # type: ignore[arg-type]
    return text, sum(isinstance(m, PlainRun) for m in items)


@pytest.mark.parametrize("as_json", [False, True])
def test_a_clean_run_prints_as_its_lines_would(as_json: bool) -> None:
    lines = [DECODE.replace(b"16", str(i).encode()) for i in range(50)]
    got, runs = as_runs(lines, 1000, as_json, Scrubber())
    assert runs == 1  # one block: no match object per line
    assert got == per_line(lines, 1000, as_json, Scrubber())


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize("odd", range(len(ODD)))
def test_a_run_with_a_line_the_parser_changes_prints_as_line_by_line(as_json: bool, odd: int) -> None:
    lines = [DECODE, ODD[odd], DECODE, ODD[1]]
    got, runs = as_runs(lines, 0, as_json, Scrubber())
    assert got == per_line(lines, 0, as_json, Scrubber())
    assert "sk-abcdef123456" not in got or odd > 0  # (the secret is masked once learned)


def test_a_value_the_profile_knows_is_masked_in_a_run() -> None:
    lines = [DECODE, DECODE.replace(b"TP0", b"hunter22")]
    got, runs = as_runs(lines, 0, False, Scrubber(["hunter22"]))
    assert runs == 0 and "hunter22" not in got
    assert got == per_line(lines, 0, False, Scrubber(["hunter22"]))


def test_the_follower_yields_runs_with_the_offsets_of_their_lines() -> None:
    recs = [b"!RUN\t100\t3", b"a", b"bb", b"ccc", b"200\tdd", b"!RUN\t300\t2", b"e"]
    rest = [b"ff", b"!POS\t400\t-"]
    lines_f, runs_f = Follower(None, "/x"), Follower(None, "/x", runs=True)  # type: ignore[arg-type]
    by_line = lines_f._records(recs) + lines_f._records(rest)
    by_run = runs_f._records(recs) + runs_f._records(rest)
    assert [x for x in by_run if isinstance(x, RawRun)] == [
        RawRun(100, [b"a", b"bb", b"ccc"]),
        RawRun(300, [b"e"]),
        RawRun(302, [b"ff"]),
    ]
    flat = []
    for x in by_run:
        if isinstance(x, RawRun):
            at = x.offset
            for data in x.lines:
                flat.append(RawLine(at, data, x.inode))
                at += len(data) + 1
        else:
            flat.append(x)
    assert flat == by_line
    assert (runs_f.offset, runs_f.check) == (lines_f.offset, lines_f.check) == (400, None)
