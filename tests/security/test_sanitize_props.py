"""Text from the box never drives the terminal: properties of the one sanitizer, and of the text
verbs that print box or journal text through it (grep, scan --events, history, report, mark).

The forbidden set is written here from the specification, not imported from the implementation:
C0 controls except newline and tab (ESC included), DEL, C1 controls, bidi controls, lone surrogates.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specdebug import cli
from specdebug.core.sanitize import visible, visible_spans
from specdebug.verbs.common import err, out, progress
from tests.pyparse import parse_file

FORBIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
HOSTILE = [
    "\x1b]52;c;ZWNobyBwd25lZA==\x07",  # OSC 52: write the clipboard
    "\x1b]0;pwned title\x07",  # OSC 0: window title
    "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\",  # OSC 8 hyperlink, ST-terminated
    "\x1b[2J\x1b[H",  # CSI: clear screen, home
    "\x1b[31mred\x1b[0m",
    "\x1bP1$r\x1b\\",  # DCS
    "\x9b2J",  # C1 CSI
    "\x9d0;c1 title\x9c",  # C1 OSC ... ST
    "\u202eevil\u202c",  # RLO ... PDF
    "\u2066iso\u2069\u200f\u200e\u061c",
    "\r",
    "\x08\x07\x00\x7f",
]
# every code point, surrogates included (text decoded with surrogateescape holds them)
ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
ANY_TEXT = st.text(alphabet=ANY_CHAR, max_size=80)
HOSTILE_TEXT = st.lists(st.one_of(st.sampled_from(HOSTILE), ANY_TEXT), max_size=6).map("".join)


def assert_clean(text: str, *, newlines: bool = True) -> None:
    bad = FORBIDDEN.search(text)
    assert bad is None, f"{bad.group()!r} emitted in {text!r}"
    if not newlines:
        assert "\n" not in text
    text.encode("utf-8")  # strict: printable on any UTF-8 terminal


@given(HOSTILE_TEXT)
def test_visible_never_emits_a_control(text: str) -> None:
    assert_clean(visible(text), newlines=False)
    assert_clean(visible(text, newlines=True))
    assert_clean(visible(text, tab=" "), newlines=False)
    assert "\t" not in visible(text, tab=None)


@given(HOSTILE_TEXT)
def test_visible_is_idempotent_and_keeps_safe_text(text: str) -> None:
    once = visible(text)
    assert visible(once) == once
    safe = FORBIDDEN.sub("", text).replace("\n", "")
    assert visible(safe) == safe


@given(HOSTILE_TEXT, st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=4))
def test_visible_spans_cover_the_same_characters(text: str, raw_spans) -> None:
    spans = [(min(a, b, len(text)), min(max(a, b), len(text)), i) for i, (a, b) in enumerate(raw_spans)]
    shown, moved = visible_spans(text, spans)
    assert_clean(shown, newlines=False)
    for (s, e, tag), (ms, me, mtag) in zip(spans, moved, strict=True):
        assert tag == mtag
        assert shown[ms:me] == visible(text[s:e], tab=" ")


def test_escapes_are_readable() -> None:
    assert visible("a\x1b]0;t\x07b") == "a\\x1b]0;t\\x07b"
    assert visible("\u202eabc") == "\\u202eabc"
    assert visible("\x9b") == "\\x9b"
    assert visible("x\ny") == "x\\ny" and visible("x\ny", newlines=True) == "x\ny"
    assert visible("a\tb") == "a\tb" and visible("a\tb", tab=" ") == "a b"
    assert visible("bad \udcff byte") == "bad \\udcff byte"
    assert visible("plain ünïcode ✓") == "plain ünïcode ✓"


@given(HOSTILE_TEXT)
def test_print_helpers_never_emit_a_control(text: str) -> None:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        out(text)
        err(text)
        progress(text)
    assert_clean(stdout.getvalue())
    assert_clean(stderr.getvalue().replace("\r", ""))  # progress's own \r, nothing else


def test_verbs_print_only_through_the_helpers() -> None:
    """A future print path cannot bypass the sanitizer: verbs call out/err/progress/print_json."""
    verbs = Path(cli.__file__).parent / "verbs"
    offenders = []
    for path in sorted(verbs.glob("*.py")):
        if path.name == "common.py":
            continue
        for node in ast.walk(parse_file(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr == "write" and "stdout" in ast.unparse(node):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


def run_cli(*args: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(list(args))
    return code, stdout.getvalue(), stderr.getvalue()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hostile")


LINE = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=30)), min_size=1, max_size=5).map(
    lambda parts: "".join(parts).replace("\n", " ")
)
SGLANG_DECODE = (
    "[2025-06-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 100, token usage: 0.01, "
    "accept len: 2.50, gen throughput (token/s): 95.00, #queue-req: 0, {}"
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(LINE, min_size=1, max_size=6))
def test_log_verbs_never_emit_a_control(workdir: Path, lines: list[str]) -> None:
    log = workdir / "server.log"
    body = [f"x {line}" for line in lines] + [SGLANG_DECODE.format(lines[0]), f"Traceback {lines[-1]}"]
    log.write_bytes(
        ("\n".join(body) + "\n").encode("utf-8", "surrogateescape") + b"x raw \x9b\xff\x1b]0;t\x07\n"
    )
    for args in (
        ("grep", str(log), "-e", "x"),
        ("grep", str(log), "--pack", "sglang"),
        ("scan", str(log), "--events"),
        ("scan", str(log), "--events", "--pack", "sglang"),
    ):
        code, stdout, stderr = run_cli(*args)
        assert code in (0, 1), (args, stderr)
        assert_clean(stdout)
        assert_clean(stderr)
    code, stdout, _ = run_cli("grep", str(log), "-e", "x", "--json")
    shown = [json.loads(x)["line"] for x in stdout.splitlines()]
    assert "x raw \ufffd\ufffd\x1b]0;t\x07" in shown  # JSON stays exact: escaped by json, not rewritten


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(HOSTILE_TEXT, HOSTILE_TEXT)
def test_journal_verbs_never_emit_a_control(workdir: Path, a: str, b: str) -> None:
    session = workdir / "session"
    events = session / "events.jsonl"
    session.mkdir(exist_ok=True)
    result = {
        "profile": a,
        "label": b,
        "status": "done",
        "decode_tok_s": 90.0,
        "config": {"concurrency": 1},
        "argv": ["python", "--flag", a],
        "env": {"NCCL_PROTO": b},
        "warnings": [a],
        "successful_requests": 10,
        "failed_requests": 0,
    }
    rows = [
        {"ts": 1.0, "kind": "bench_result", **result},
        {"ts": 2.0, "kind": "bench_result", **{**result, "profile": b, "env": {"NCCL_PROTO": a}}},
        {"ts": 3.0, "kind": "verdict", "verdict": "failed", "reason": a, "excerpt": [a, b]},
        {"ts": 4.0, "kind": "mark", "label": b},
        {"ts": 5.0, "kind": "bench_result", **{**result, "status": "failed", "failure_reason": b}},
    ]
    events.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for args in (
        ("history", "--session", str(session)),
        ("history", "--session", str(session), "--compare", "1", "2"),
        ("history", "--session", str(session), "--compare", "1", "3"),
        ("report", "--session", str(session)),
        ("mark", a or "m", "--session", str(session)),
    ):
        code, stdout, stderr = run_cli(*args)
        assert code in (0, 2), (args, stderr)
        assert_clean(stdout)
        assert_clean(stderr)
    report = session / "report.md"
    run_cli("report", "--session", str(session), "-o", str(report))
    assert_clean(report.read_text(encoding="utf-8"))
