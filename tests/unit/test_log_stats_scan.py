"""Series stats, warmup exclusion, whole-file scans, HOST:PATH parsing, context windows, verbs."""

from __future__ import annotations

import json
import math
import random
import statistics
from pathlib import Path

import pytest

from specdebug.core.logs.context import context_from_bytes
from specdebug.core.logs.location import split_host_path
from specdebug.core.logs.scan import iter_lines_with_offsets, scan_file, scan_lines
from specdebug.core.logs.stats import MetricStore, Series, percentile
from specdebug.core.profiles import load_profile

READY = "[2026-01-15 12:00:02] The server is fired up and ready to roll!"


def decode(al: float, tp: float = 10.0) -> str:
    return (
        f"[2026-01-15 12:00:03 TP0] Decode batch, #running-req: 1, #token: 9, token usage: 0.01, accept len: {al:.2f}, "
        f"accept rate: 0.50, cuda graph: True, gen throughput (token/s): {tp:.2f}, #queue-req: 0"
    )


def test_series_stats_exact() -> None:
    s = Series()
    vals = [5.0, 1.0, 3.0, 2.0, 4.0]
    s.extend(vals)
    st = s.stats()
    assert (st.n, st.mean, st.min, st.max, st.last) == (5, 3.0, 1.0, 5.0, 4.0)
    assert st.p50 == 3.0 and st.p90 == pytest.approx(4.6)
    assert Series().stats().n == 0
    assert percentile([1.0], 90) == 1.0 and percentile([], 50) is None


def test_series_bounded_memory_and_sane_percentiles() -> None:
    s = Series(reservoir=1000, recent=50)
    for i in range(20_000):
        s.add(float(i % 100))
    st = s.stats()
    assert st.n == 20_000 and st.mean == pytest.approx(49.5) and st.min == 0 and st.max == 99
    assert len(s._res) == 1000 and len(s.recent) == 50
    assert 40 <= st.p50 <= 60 and 80 <= st.p90 <= 99


class _CountingRandom(random.Random):
    """random.Random that counts the numbers drawn (random() and getrandbits/randrange)."""

    drawn = 0

    def random(self) -> float:
        self.drawn += 1
        return super().random()

    def getrandbits(self, k: int) -> int:
        self.drawn += 1
        return super().getrandbits(k)


def test_reservoir_draws_only_for_the_samples_it_keeps() -> None:
    """Past the reservoir, random numbers are drawn per sample kept (about k*ln(n/k) of them), not
    per sample: a 200k-sample series with a 1024 reservoir draws a few thousand, not 200k."""
    s = Series(reservoir=1024, recent=8, seed=2)
    s._rng = _CountingRandom(2)
    n = 200_000
    s.extend(float(i) for i in range(n))
    assert s.n == n
    kept = 1024 * math.log(n / 1024)  # expected replacements
    assert s._rng.drawn < 3 * (2 * kept + 256), s._rng.drawn  # 3 numbers per replacement + a plan ahead


def test_reservoir_is_exact_below_its_size_and_repeats_for_a_seed() -> None:
    vals = [float((i * 7919) % 1000) for i in range(1000)]
    s = Series(reservoir=1000)
    s.extend(vals)
    assert list(s._res) == vals  # every sample kept, in order: p50/p90 exact
    st = s.stats()
    assert st.p50 == statistics.median(vals)
    many = [float(i) for i in range(50_000)]
    one, two = Series(reservoir=1000, seed=4), Series(reservoir=1000, seed=4)
    one.extend(many)
    for v in many:
        two.add(v)
    assert list(one._res) == list(two._res)  # seeded and independent of how samples were batched
    three = Series(reservoir=1000, seed=5)
    three.extend(many)
    assert list(three._res) != list(one._res)


def test_reservoir_is_a_uniform_sample() -> None:
    """Each of n samples ends in a k reservoir with probability k/n: over many seeds, each tenth of
    the stream holds a tenth of the kept samples (within 5 %; the spread expected is about 1 %)."""
    n, cap, seeds = 2000, 100, 600
    per_tenth = [0] * 10
    for seed in range(seeds):
        s = Series(reservoir=cap, recent=1, seed=seed)
        s.extend(float(i) for i in range(n))
        for v in s._res:
            per_tenth[int(v) * 10 // n] += 1
    want = seeds * cap / 10
    assert all(abs(c - want) < 0.05 * want for c in per_tenth), per_tenth


def test_store_list_metrics_and_warmup() -> None:
    store = MetricStore()
    store.add("ppa", [0.9, 0.5], warmup=True)
    store.add("ppa", [0.7, 0.3])
    store.add("x", 1.0, warmup=True)
    # no marker seen: everything counts
    summ = store.summary()
    assert summ["ppa"]["n"] == 2 and summ["ppa"]["mean"] == pytest.approx([0.8, 0.4])
    assert summ["x"]["n"] == 1
    store.marker_seen = True
    summ = store.summary()
    assert summ["ppa"]["last"] == [0.7, 0.3] and summ["ppa"]["n"] == 1
    assert "x" not in summ
    assert store.summary(include_warmup=True)["x"]["n"] == 1


def test_scan_warmup_excluded_by_default() -> None:
    lines = [decode(1.0, 0.4), decode(1.0, 0.4), READY, decode(2.0), decode(3.0), decode(4.0)]
    res = scan_lines(lines)
    assert res.pack == "sglang" and res.lines == 6
    al = res.metrics["accept_len"]
    assert al["n"] == 3 and al["mean"] == pytest.approx(3.0) and al["min"] == 2.0 and al["last"] == 4.0
    assert res.events["decode_batch"] == 5 and res.events["ready"] == 1
    inc = scan_lines(lines, include_warmup=True)
    assert inc.metrics["accept_len"]["n"] == 5
    assert inc.metrics["accept_len"]["mean"] == pytest.approx(statistics.mean([1, 1, 2, 3, 4]))


def test_scan_without_marker_counts_everything() -> None:
    res = scan_lines([decode(2.0), decode(3.0)])
    assert res.metrics["accept_len"]["n"] == 2 and not res.warmup_marker


def test_restart_in_same_file_opens_warmup_again() -> None:
    lines = [
        "[2026-01-15 11:00:00] server_args=ServerArgs(model_path='a')",
        decode(1.0),
        READY,
        decode(2.0),
        "[2026-01-15 13:00:00] server_args=ServerArgs(model_path='b')",
        decode(9.0),
        READY,
        decode(3.0),
    ]
    res = scan_lines(lines)
    assert res.metrics["accept_len"]["n"] == 2 and res.metrics["accept_len"]["max"] == 3.0


def test_scan_vllm_excerpt_json_shape(tmp_path: Path) -> None:
    log = tmp_path / "v.log"
    log.write_text(
        "(APIServer pid=1) INFO 05-04 01:06:43 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 2.40, "
        "Accepted throughput: 41.10 tokens/s, Drafted throughput: 120.30 tokens/s, Accepted: 411 tokens, Drafted: "
        "1203 tokens, Per-position acceptance rate: 0.700, 0.450, 0.250, Avg Draft acceptance rate: 34.2%\n"
        "(APIServer pid=1) INFO 05-04 01:06:53 [metrics.py:101] SpecDecoding metrics: Mean acceptance length: 2.60, "
        "Accepted throughput: 45.00 tokens/s, Drafted throughput: 121.00 tokens/s, Accepted: 450 tokens, Drafted: "
        "1210 tokens, Per-position acceptance rate: 0.800, 0.500, 0.300, Avg Draft acceptance rate: 37.2%\n"
        "(EngineCore_DP0 pid=7) ERROR 05-04 01:07:00 [core.py:700] EngineCore failed to start."  # no final newline
    )
    res = scan_file(log)
    d = json.loads(res.model_dump_json())
    assert d["pack"] == "vllm" and d["lines"] == 3
    assert d["metrics"]["mean_acceptance_length"]["mean"] == pytest.approx(2.5)
    assert d["metrics"]["per_position_acceptance"]["last"] == [0.8, 0.5, 0.3]
    assert set(d["metrics"]["draft_acceptance_rate"]) == {"n", "mean", "p50", "p90", "min", "max", "last"}
    assert d["events"] == {"spec_decode": 2, "error": 1}


def test_offsets_from_chunks() -> None:
    got = list(iter_lines_with_offsets([b"ab\ncd", b"e\n\nf"]))
    assert got == [(0, b"ab"), (3, b"cde"), (7, b""), (8, b"f")]


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("gpubox:/var/log/x.log", ("gpubox", "/var/log/x.log")),
        ("user@host:2222:/var/log/x.log", ("user@host:2222", "/var/log/x.log")),
        ("user@host:~/logs/a:b.log", ("user@host", "~/logs/a:b.log")),
        ("h:/a:/b", ("h", "/a:/b")),
        ("[::1]:22:/x", ("[::1]:22", "/x")),
        ("/tmp/x.log", (None, "/tmp/x.log")),
        ("logs/x.log", (None, "logs/x.log")),
        ("./a:/b", (None, "./a:/b")),
        ("host:relative.log", (None, "host:relative.log")),
    ],
)
def test_split_host_path(text: str, want: tuple) -> None:
    assert split_host_path(text) == want


def test_context_window() -> None:
    data = b"".join(f"line {i}\n".encode() for i in range(100))
    offsets = [data.index(f"line {i}\n".encode()) for i in range(100)]
    ctx = context_from_bytes(data, 0, offsets[50], before=3, after=2)
    assert [c.text for c in ctx] == ["line 47", "line 48", "line 49", "line 50", "line 51", "line 52"]
    assert [c.target for c in ctx] == [False, False, False, True, False, False]
    assert all(data[c.offset : c.offset + len(c.text)].decode() == c.text for c in ctx)
    # window starting mid-line: the cut first line is dropped
    start = offsets[40] + 2
    ctx = context_from_bytes(data[start:], start, offsets[45], before=20, after=0)
    assert [c.text for c in ctx][0] == "line 41" and ctx[-1].text == "line 45"
    # near the top of the file
    ctx = context_from_bytes(data, 0, offsets[1], before=20, after=1)
    assert [c.text for c in ctx] == ["line 0", "line 1", "line 2"]


def test_scan_verb_local(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from specdebug.cli import main

    log = tmp_path / "s.log"
    log.write_text("\n".join([decode(1.0), READY, decode(2.0), decode(4.0)]) + "\n")
    assert main(["scan", str(log), "--json", "--events"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [o.get("event") for o in out[:-1]] == ["decode_batch", "ready", "decode_batch", "decode_batch"]
    assert out[0]["warmup"] is True and out[2]["warmup"] is False and out[2]["offset"] > 0
    summary = out[-1]
    assert summary["metrics"]["accept_len"]["n"] == 2 and summary["metrics"]["accept_len"]["mean"] == 3.0
    assert summary["events"]["decode_batch"] == 3
    assert main(["scan", str(log)]) == 0
    text = capsys.readouterr().out
    assert "accept_len" in text and "pack: sglang" in text
    assert main(["scan", str(tmp_path / "missing.log"), "--json"]) == 2  # a missing file: usage error


def test_scan_verb_with_profile(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from specdebug.cli import main

    prof = tmp_path / "p.toml"
    prof.write_text(
        'name = "p"\n[server]\nargv = ["python", "-m", "sglang.launch_server", "--port", "30000"]\nkind = "sglang"\n'
        "[patterns]\nverify_ms = 'Target verify[^0-9]*(?P<value>[0-9.]+) ?ms'\n"
    )
    load_profile(prof)  # a valid profile: a schema change that rejects it fails here, loudly
    log = tmp_path / "s.log"
    log.write_text(
        "[2026-01-15 12:00:05 TP0] Target verify took 3.25 ms\n[2026-01-15 12:00:06 TP0] Target verify: 4.75ms\n"
    )
    assert main(["scan", str(log), "-c", str(prof), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["pack"] == "sglang"
    assert d["metrics"]["verify_ms"]["n"] == 2 and d["metrics"]["verify_ms"]["mean"] == 4.0
    assert d["events"]["verify_ms"] == 2


def test_grep_verb_local(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from specdebug.cli import main

    log = tmp_path / "s.log"
    log.write_text("\n".join([decode(1.0), READY, decode(2.5), "nothing"]) + "\n")
    assert main(["grep", str(log), "-e", r"accept len: (?P<al>[0-9.]+)", "--json"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [o["fields"]["al"] for o in out] == [1.0, 2.5]
    assert all({"offset", "line", "fields"} <= set(o) for o in out)
    assert main(["grep", str(log), "-e", "zzz"]) == 1
    assert main(["grep", str(log), "-e", "(bad"]) == 2


def test_fast_match_equals_validated_model() -> None:
    from specdebug.core.logs.events import LogMatch

    fast = LogMatch.fast(line="x", event="decode_batch", offset=3, metrics={"a": 1.0})
    slow = LogMatch(line="x", event="decode_batch", offset=3, metrics={"a": 1.0})
    assert fast == slow and fast.model_dump() == slow.model_dump()
    assert fast.model_fields_set == {"line", "event", "offset", "metrics"}
    assert LogMatch.fast(line="y", event="e").also is not LogMatch.fast(line="z", event="e").also


def test_last_run_counts_only_the_latest_server_in_an_appended_log(tmp_path):
    from specdebug.core.logs.scan import scan_file

    def run(gen: float) -> list[str]:
        return [
            "[2026-01-15 12:00:00] server_args=ServerArgs(model_path='m')",
            "[2026-01-15 12:00:09] The server is fired up and ready to roll!",
            *[
                f"[2026-01-15 12:00:1{i}] Decode batch, #running-req: 1, #token: 9, token usage: 0.01, "
                f"accept len: 2.0, accept rate: 0.5, cuda graph: True, gen throughput (token/s): {gen}, #queue-req: 0"
                for i in range(3)
            ],
        ]

    log = tmp_path / "server.log"
    log.write_text("\n".join(run(94.0) + run(60.0)) + "\n")
    both = scan_file(log)
    last = scan_file(log, last_run=True)
    assert both.metrics["gen_throughput"]["n"] == 6 and both.events["ready"] == 2
    assert last.metrics["gen_throughput"]["n"] == 3 and last.metrics["gen_throughput"]["max"] == 60.0
    assert last.events["ready"] == 1 and last.lines == 5


def test_grep_with_a_profile_puts_its_pattern_numbers_in_the_json(tmp_path: Path, capsys) -> None:
    """`grep -e 'Target verify' -c P --json` gave `"fields": {}, "metrics": {}` while `scan -c P`
    parsed the same line (issue 26): the profile's [patterns] parse what -e selects."""
    from specdebug.cli import main

    prof = tmp_path / "p.toml"
    prof.write_text(
        'name = "p"\n[server]\nargv = ["python", "-m", "sglang.launch_server", "--port", "30000"]\nkind = "sglang"\n'
        "[patterns]\nverify_ms = 'Target verify[^0-9]*(?P<value>[0-9.]+) ?ms'\n"
    )
    load_profile(prof)
    log = tmp_path / "s.log"
    log.write_text(
        "[2026-01-15 12:00:05 TP0] [EAGLE3 profile] step=10 draft: 1.20 ms, Target verify: 16.02 ms\n"
        + decode(2.5)
        + "\n"
    )
    assert main(["grep", str(log), "-e", "Target verify", "-c", str(prof), "--json"]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(out) == 1  # -e still selects: the decode line is not reported
    # the profile's verify_ms replaces the pack's; the pack's own draft time (engines.pack.TIMINGS_COMMON) stays
    assert out[0]["metrics"] == {"verify_ms": 16.02, "draft_ms": 1.2}
    assert "verify_ms" in [out[0]["event"], *out[0]["also"]]
    # the pack's numbers too, for a line the pack knows
    assert main(["grep", str(log), "-e", "Decode batch", "-c", str(prof), "--json"]) == 0
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert line["metrics"] and line["event"] == "decode_batch"
