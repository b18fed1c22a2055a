"""Pure parts of bisection: the judge (midpoint, noise band, ends, drift), the gate expression, knobs
and candidates (names, groups, fingerprints), rejected-argument detection, the report section."""

from __future__ import annotations

from pathlib import Path

import pytest

from specdebug.core.bench.models import BenchResult, LatencyStats, ServerMetrics
from specdebug.core.bisect import models as bm
from specdebug.core.bisect.book import unfinished
from specdebug.core.bisect.gate import GateError, gate_value, parse_gate
from specdebug.core.bisect.judge import (
    FULL,
    START_METRIC,
    ZERO,
    Judge,
    Reading,
    above,
    higher_is_better,
    metrics_of,
    plausible,
    t99,
)
from specdebug.core.bisect.knobs import NAME_SUFFIX, Candidates, GroupError
from specdebug.core.bisect.report import bisect_markdown
from specdebug.core.bisect.trial import ARGS_REJECTED
from specdebug.core.profiles import load_profile_text
from specdebug.core.records import BisectResultRecord, BisectStartRecord

GOOD = """\
name = "good"
[server]
argv = ["python3", "-m", "sglang.launch_server", "--port", "30001", "--speculative-num-steps", "2",
        "--speculative-eagle-topk", "1"]
log_file = "~/logs/good.log"
env = { NCCL_PROTO = "LL", NCCL_ALGO = "Ring" }
"""
BAD = """\
name = "bad"
[server]
argv = ["python3", "-m", "sglang.launch_server", "--port", "30002", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "4", "--disable-cuda-graph"]
"""


def test_shares_are_of_time_per_token_with_a_t_interval() -> None:
    j = Judge("output_tok_s", [94.0, 94.2], [60.0, 60.1])
    assert j.noise.measured and j.noise.dof == 2 and j.t == pytest.approx(9.925)
    assert j.reading([94.1]).share == pytest.approx(0.0, abs=0.01)
    assert j.reading([60.05]).share == pytest.approx(1.0, abs=0.01)
    # one knob costing a third of the extra time per token reads a third, not the midpoint's "good"
    third = 1 / (1 / 94.1 + (1 / 60.05 - 1 / 94.1) / 3)
    r = j.reading([third])
    assert r.share == pytest.approx(1 / 3, abs=0.01) and r.low < 1 / 3 < r.high
    assert not plausible(r, ZERO) and not plausible(r, FULL)
    assert higher_is_better("output_tok_s") and not higher_is_better("ttft_ms")
    assert not higher_is_better("itl_ms.p99")
    lat = Judge("ttft_ms", [40.0, 40.1], [80.0, 80.1])
    assert lat.reading([60.05]).share == pytest.approx(0.5, abs=0.01)  # latencies as they are


def test_ends_distinct_same_or_unresolved_with_the_repeats_that_would_settle_it() -> None:
    assert Judge("tok_s", [94.0, 94.3], [60.0, 60.2]).ends()[0] == "distinct"
    same = Judge("tok_s", [94.0, 94.1, 94.05], [92.0, 92.1, 92.05])  # clearly apart, but 2 % < --min-gap 5 %
    assert same.ends()[0] == "same" and "--min-gap" in same.ends()[1]
    noisy = Judge("tok_s", [94.0, 99.0, 90.0], [91.0, 96.0, 88.0])  # 3 % apart, sd ~4.5 %
    state, why, need = noisy.ends()
    assert state == "unresolved" and need is not None and need > 3 and "standard errors" in why
    # one run each, no per-step figure: a working prior tells 94 from 60 (where to look next; no culprit
    # stands on it: verify.py), but "the same" is never said on it
    one = Judge("tok_s", [94.0], [60.0])
    assert one.ends()[0] == "distinct" and one.noise.source == "prior" and not one.noise.measured
    assert Judge("tok_s", [94.0], [92.0]).ends()[0] == "unresolved"
    assert not Judge("ttft_ms", [70.0, 70.1], [80.0, 80.1], threshold=60.0).ends()[0] == "distinct"


def test_noise_pools_repeated_candidates_and_has_a_floor() -> None:
    j = Judge("tok_s", [80.0, 80.0], [60.0, 60.0])
    # floor, not zero: relative (0.3 %), shown at the good end's level in cost units
    assert j.rel == pytest.approx(0.003) and j.sd == pytest.approx(0.003 / 80, rel=0.01)
    k = Judge("tok_s", [80.0, 80.0], [60.0, 60.0], others=[[70.0, 74.0]])
    assert k.noise.dof == 3 and k.sd > j.sd


def test_drift_and_start_mode() -> None:
    j = Judge("tok_s", [94.0, 94.5, 93.8], [60.0, 60.3])
    assert j.drifted(j.good, [80.0]) and not j.drifted(j.good, [94.2])
    s = Judge(START_METRIC, [0.0], [1.0], exact=True)
    assert s.ends()[0] == "distinct" and s.reading([1.0]).share == 1.0 and s.reading([0.0]).share == 0.0
    assert plausible(s.reading([1.0]), FULL) and not plausible(s.reading([1.0]), ZERO)


def test_t_quantiles() -> None:
    assert t99(0) == float("inf") and t99(1) == pytest.approx(63.66) and t99(11) == pytest.approx(3.112)
    assert t99(1000) == pytest.approx(2.576) and above(Reading(0.5, 0.01, 3.0), ZERO)


def test_metrics_of_a_result() -> None:
    r = BenchResult(
        output_tok_s=90.0,
        decode_tok_s=95.0,
        ttft_ms=LatencyStats(p50=40.0, p99=55.0),
        server=ServerMetrics(verify_ms=19.0, accept_len=1.9),
    )
    m = metrics_of(r)
    assert m["output_tok_s"] == 90.0 and m["tok_s"] == 95.0 and m["ttft_ms"] == 40.0
    assert m["ttft_ms.p99"] == 55.0 and m["verify_ms"] == 19.0 and m["accept_len"] == 1.9


def test_gate_expressions_and_values_from_a_log() -> None:
    g = parse_gate("verify_ms <= 25")
    assert (g.name, g.op, g.limit) == ("verify_ms", "<=", 25.0) and g.passes(19.0) and not g.passes(30.0)
    assert parse_gate("accept_len>1.5").passes(1.9)
    for bad in ("verify_ms", "verify_ms=25", "25<=verify_ms", "x<=y"):
        with pytest.raises(GateError):
            parse_gate(bad)
    log = b"".join(
        f"[2026-01-01 00:00:0{i}] [EAGLE3 profile] step={i * 10} draft: 4.00 ms, Target verify: {v} ms, accept: 2\n".encode()
        for i, v in enumerate((29.0, 31.0))
    )
    patterns = {"verify_ms": r"Target verify[^0-9]*(?P<value>[0-9.]+) ?ms"}
    assert gate_value(log, g, patterns, "sglang") == pytest.approx(30.0)
    assert gate_value(b"nothing here\n", g, patterns, "sglang") is None


def test_candidates_get_their_own_name_log_and_fingerprint(tmp_path: Path) -> None:
    good, bad = load_profile_text(GOOD, tmp_path / "good.toml"), load_profile_text(BAD, tmp_path / "bad.toml")
    c = Candidates(good, bad)
    names = [k.name for k in c.knobs]
    assert names == [
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--disable-cuda-graph",
        "NCCL_ALGO",
        "NCCL_PROTO",
    ]
    assert "--port" not in names  # placement is not a knob
    assert c.profile(frozenset()) == (good, good.fingerprint())
    everything = frozenset(range(len(c.units)))
    assert c.profile(everything) == (bad, bad.fingerprint())  # all knobs applied = the bad end's fingerprint
    cand, fp = c.profile(frozenset({2}))
    assert cand.name == f"good{NAME_SUFFIX}{fp[:8]}" and cand.server.port == 30001
    assert cand.server.log_file == f"~/logs/{cand.name}.log" and "--disable-cuda-graph" in cand.server.argv
    assert fp not in (c.good_fp, c.bad_fp) and fp == cand.fingerprint()
    grouped = Candidates(good, bad, ["--speculative-*", "NCCL_*"])
    assert [u.name for u in grouped.units] == ["--speculative-*", "--disable-cuda-graph", "NCCL_*"]
    assert grouped.knob_names(frozenset({0})) == ["--speculative-num-steps", "--speculative-eagle-topk"]
    with pytest.raises(GroupError):
        Candidates(good, bad, ["--nothing-*"])


def test_rejected_arguments_are_recognised() -> None:
    assert ARGS_REJECTED.search("launch_server.py: error: unrecognized arguments: --bogus 1")
    assert ARGS_REJECTED.search("sim: error: argument --log-level: invalid choice: 'loud'")
    assert ARGS_REJECTED.search("usage: python -m sglang.launch_server [-h] ...")
    assert not ARGS_REJECTED.search("torch.OutOfMemoryError: CUDA out of memory.")


def test_report_section_and_unfinished_bisections() -> None:
    knobs = [
        bm.KnobRow(
            name="--disable-cuda-graph", kind="flag", good=None, bad="(set)", unit="--disable-cuda-graph"
        )
    ]
    trial = bm.TrialRow(index=2, role=bm.Role.CANDIDATE, config="c", applied=["--disable-cuda-graph"], fingerprint="f" * 12,
                        metric=None, judged=bm.Judged.BAD, gated=True, reason="gate verify_ms<=19: verify_ms = 21.60")  # fmt: skip
    result = bm.Result(
        verdict="found",
        culprits=["--disable-cuda-graph"],
        knobs=knobs,
        trials=[trial],
        launches=4,
        naive_launches=9,
        bisect="b1",
        good={"name": "fast"},
        bad={"name": "slow"},
    )
    events = [
        BisectStartRecord(bisect="b1", good={"file": "a.toml"}),
        BisectStartRecord(bisect="b2", good={"file": "c.toml"}),
        BisectResultRecord(result=result),
    ]
    text = "\n".join(bisect_markdown(events))
    assert "## Bisection" in text and "fast (good) vs slow (bad): found" in text
    assert "culprit: `--disable-cuda-graph`" in text and "one knob at a time: 9, 5 saved" in text
    assert "| 2 | candidate | `--disable-cuda-graph` |" in text and "| yes |" in text
    assert unfinished(events).bisect == "b2"
    assert unfinished(events[2:]) is None and bisect_markdown([]) == []


def test_the_metrics_a_front_end_offers_are_ones_the_judge_knows() -> None:
    from specdebug.core.bisect.judge import METRIC_CHOICES, known_metrics

    names = [m for m, _ in METRIC_CHOICES]
    assert names[0] == "output_tok_s" and len(set(names)) == len(names)
    assert set(names) <= set(known_metrics())
