"""scan's block path (core/logs/blockscan.py) against feeding every line through the parser.

The two must give the same ScanResult, byte for byte, on every fixture log and on logs built to hit
each reason a line must leave the block path: a secret learned in the middle of a block (the
scrubber then masks text a shape would have matched), ESC, CR, an overlong line, broken UTF-8, a
batch line with a `name=value` in it, warmup markers, a second server start (last_run), a pack
decided from the lines (auto). The per-line path is what `scan --events` takes (it wants each
match), so comparing with it compares with the full parser.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from specdebug.core.limits import MAX_LINE
from specdebug.core.logs.parser import LogParser
from specdebug.core.logs.scan import scan_chunks
from tests.unit.test_fast_parse_equiv import CORPUS, STAT_LINES

FIXTURES = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "logs").glob("*.log"))

ARGS = (
    "[2026-01-15 11:59:01] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE3', "
    "speculative_num_draft_tokens=4, port=30000)"
)
READY = "[2026-01-15 11:59:58] The server is fired up and ready to roll!"
DECODE = (
    "[2026-01-15 12:{m:02d}:{s:02d} TP0] Decode batch, #running-req: {run}, #token: {tok}, token usage: {use:.2f}, "
    "accept len: {al:.2f}, accept rate: {ar:.2f}, cuda graph: True, gen throughput (token/s): {gt:.2f}, "
    "#queue-req: {q}"
)
PREFILL = (
    "[2026-01-15 12:{m:02d}:{s:02d} TP0] Prefill batch, #new-seq: 1, #new-token: {tok}, #cached-token: 0, "
    "token usage: {use:.2f}, #running-req: {run}, #queue-req: {q}"
)
ACCESS = (
    '[2026-01-15 12:{m:02d}:{s:02d}] INFO:     127.0.0.1:{run} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
)


def server_lines(rng: random.Random, n: int) -> list[str]:
    """A running SGLang server's lines: decode, some prefill and access lines, values varying."""
    out = []
    for _ in range(n):
        kind = rng.random()
        fmt = DECODE if kind < 0.8 else PREFILL if kind < 0.9 else ACCESS
        out.append(
            fmt.format(
                m=rng.randrange(60),
                s=rng.randrange(60),
                run=rng.randrange(1, 64),
                tok=rng.randrange(1, 300000),
                use=rng.random(),
                al=rng.uniform(1, 4),
                ar=rng.random(),
                gt=rng.uniform(1, 3000),
                q=rng.randrange(8),
            )
        )
    return out


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def both(data: bytes, size: int, **kw: object) -> tuple[str, str]:
    """(block path, line by line) results as JSON, the data read in chunks of `size`."""
    block = scan_chunks(chunks(data, size), **kw).model_dump_json()  # type: ignore[arg-type]
    lines = scan_chunks(chunks(data, size), on_match=lambda m: None, **kw).model_dump_json()  # type: ignore[arg-type]
    return block, lines


def assert_same(
    data: bytes, sizes: tuple[int, ...] = (1 << 20, 97), packs: tuple[str, ...] = ("auto", "sglang", "vllm")
) -> None:
    for size in sizes:
        for pack in packs:
            for kw in ({}, {"include_warmup": True}, {"last_run": True, "draft_tokens": 3}):
                block, lines = both(data, size, pack=pack, **kw)
                assert block == lines, (size, pack, kw)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_fixture_logs_scan_the_same(path: Path) -> None:
    data = path.read_bytes()
    assert_same(data)
    assert_same(data * 3)  # each layout again once learned: now in bulk


def test_the_corpus_of_real_lines_scans_the_same() -> None:
    """Every real-format line of the log tests, each three times (learned, then in bulk)."""
    assert_same("\n".join(line for line in CORPUS for _ in range(3)).encode() + b"\n", (1 << 20, 1000))
    stat = [line for line in STAT_LINES for _ in range(4)]
    random.Random(3).shuffle(stat)
    assert_same("\n".join(stat).encode(), (1 << 20, 1000))


def test_a_server_log_scans_the_same() -> None:
    rng = random.Random(11)
    text = "\n".join(
        [ARGS, *server_lines(rng, 300), READY, *server_lines(rng, 3000), ARGS, *server_lines(rng, 500)]
    )
    assert_same(text.encode() + b"\n", (1 << 20, 4096), ("auto", "sglang"))


def test_lines_that_must_leave_the_block_path_scan_the_same() -> None:
    rng = random.Random(5)
    decode = (
        server_lines(rng, 1)[0]
        if "Decode" in server_lines(rng, 1)[0]
        else DECODE.format(m=1, s=2, run=3, tok=4, use=0.5, al=2.5, ar=0.5, gt=10.0, q=0)
    )
    odd = [
        # a secret learned from this line ("Decode") is masked in every later line: no shape fits them
        "[2026-01-15 12:00:00] server_args=ServerArgs(api_key=Decode, speculative_num_draft_tokens=3)",
        "\x1b[32m" + decode + "\x1b[0m",
        decode + "\r",
        decode.replace("#queue-req: 0", "#queue-req: 0, note=x"),
        decode.replace("Decode batch", "Decode batch \xff\xfe"),
        decode + ", pad: " + "x" * (MAX_LINE + 10),
        READY,
    ]
    for i, line in enumerate(odd):
        before = server_lines(rng, 200)
        after = server_lines(rng, 200)
        data = "\n".join([*before, line, *after, READY, *server_lines(rng, 50)]).encode(
            "utf-8", "surrogateescape"
        )
        data = data.replace("\xff\xfe".encode("utf-8", "surrogateescape"), b"\xff\xfe")
        assert_same(data, (1 << 20, 5000), ("auto", "sglang"))
        if i == 0:
            # and the secret really is masked in the lines after it (the case is not vacuous)
            res = scan_chunks([data], pack="sglang")
            assert res.events["decode_batch"] < sum("Decode batch" in x for x in [*before, *after])


def test_batch_lines_go_through_the_parser_once_per_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the block path: the full parser sees a server's batch lines only until their
    layout is learned (and the lines no shape fits); the rest go in bulk."""
    calls = 0
    parse = LogParser.parse

    def counting(self: LogParser, *a: object, **kw: object) -> object:
        nonlocal calls
        calls += 1
        return parse(self, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(LogParser, "parse", counting)
    lines = [ARGS, READY, *server_lines(random.Random(2), 5000)]
    res = scan_chunks([("\n".join(lines) + "\n").encode()], pack="sglang")
    access = sum("POST /v1" in line for line in lines)
    assert res.lines == len(lines)
    assert calls < access + 50, (calls, access)


def test_store_twin_series_part_exactly_at_the_first_warmup_sample() -> None:
    """After-warmup samples go to one series shared by both tables (one reservoir draw each, not
    two) until a warmup sample comes (a server restart in the log): then they part, each going on
    exactly as two series fed separately would (past the reservoir: the draws must line up)."""
    from specdebug.core.logs.events import LogMatch
    from specdebug.core.logs.stats import MetricStore
    from tests.unit.test_fast_parse_equiv import RefStore, _state

    rng = random.Random(4)
    ref, store = RefStore(50, 10), MetricStore(reservoir=50, recent=10)
    for i in range(3000):
        metrics = {"accept_len": rng.random() * 4, "running_req": float(i % 5)}
        warmup = 1000 <= i < 1200
        store.add_match(LogMatch.fast(line="x", event="decode_batch", metrics=metrics, warmup=warmup))
        for name, value in metrics.items():
            ref.add(name, value, warmup)
        if i == 999:
            store.flush()
            assert store._all["accept_len"] is store._post["accept_len"]  # shared so far
    store.flush()
    assert store._all["accept_len"] is not store._post["accept_len"]
    for mine, theirs in ((store._all, ref.all), (store._post, ref.post)):
        assert {k: _state(v) for k, v in mine.items()} == {k: _state(v) for k, v in theirs.items()}


def test_empty_and_near_miss_lines_and_both_float_modes_scan_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The combined regex of the block path (one findall per block, one tuple per line): empty
    lines, a layout's line cut short or one digit turned into a letter, lines of two layouts that
    share metrics interleaved; and the texts-to-floats memo both while it holds every text and
    after it gave up (too many distinct texts: float() of each)."""
    from specdebug.core.logs import blockscan

    rng = random.Random(8)
    lines = [ARGS, READY]
    for line in server_lines(rng, 3000):
        r = rng.random()
        if r < 0.03:
            lines.append("")
        elif r < 0.05:
            lines.append(line[: len(line) // 2])
        elif r < 0.07:
            lines.append(line.replace("1", "l", 1))
        lines.append(line)
    data = ("\n".join(lines) + "\n\n").encode()
    assert_same(data, (1 << 20, 3000), ("auto", "sglang"))
    monkeypatch.setattr(blockscan, "MEMO_MAX", 8)
    blockscan._combined.cache_clear()  # (fresh memos)
    assert_same(data, (1 << 20,), ("sglang",))
