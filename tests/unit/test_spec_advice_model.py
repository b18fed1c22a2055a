"""The speculation advisor's model (core.spec.model), by hand: E(k) from per-position acceptance and
from accept lengths per depth, the extrapolation past the deepest position, the cycle line and its
bounded form, a config off the fit, the intervals, and the cannot-tell cases of `advise`."""

from __future__ import annotations

import json

import pytest

from specdebug.core.bench.models import BenchConfig, BenchResult, LatencyStats, ServerMetrics, StreamCycles
from specdebug.core.journal import Journal
from specdebug.core.records import SpecAdviceTryRecord
from specdebug.core.report import HistoryEntry
from specdebug.core.spec import model as m
from specdebug.core.spec.advise import advise, depth_flags, family, with_depth


def test_expected_tokens_are_one_plus_the_reach_of_each_position() -> None:
    acc = m.accept_model([m.AcceptObs("a", 3, [0.8, 0.6, 0.4], count=10_000)])
    tok = acc.tokens(3)
    assert tok is not None and tok.mid == pytest.approx(2.8) and not tok.extrapolated
    assert acc.tokens(1).mid == pytest.approx(1.8) and acc.tokens(2).mid == pytest.approx(2.4)
    assert tok.low < tok.mid < tok.high and tok.high - tok.low < 0.1  # 10 000 drafts: narrow


def test_accept_lengths_per_depth_give_the_reach_between_measured_depths() -> None:
    """SGLang: A(2) = 1.88 and A(3) = 2.056 -> r_3 = 0.176; E(3) = A(3); E(1) cannot be told."""
    acc = m.accept_model([m.AcceptObs("two", 2, accept_len=1.88), m.AcceptObs("three", 3, accept_len=2.056)])
    assert acc.reach[3][0] == pytest.approx(0.176)
    assert acc.tokens(3).mid == pytest.approx(2.056) and acc.tokens(2).mid == pytest.approx(1.88)
    assert acc.tokens(1) is None  # r_1 alone was never measured: cannot tell
    assert acc.tokens(4) is None  # r_2 unknown, so no conditional acceptance to carry on


def test_past_the_deepest_position_the_conditional_acceptance_is_carried_on_with_a_wider_interval() -> None:
    acc = m.accept_model([m.AcceptObs("a", 2, [0.8, 0.6], count=1_000_000)])
    measured, beyond = acc.tokens(2), acc.tokens(4)
    assert beyond is not None and beyond.extrapolated and "extrapolated" in beyond.source
    q = 0.6 / 0.8  # r_3 = 0.45, r_4 = 0.3375
    assert beyond.mid == pytest.approx(1 + 0.8 + 0.6 + 0.6 * q + 0.6 * q * q)
    assert (beyond.high - beyond.low) > 5 * (measured.high - measured.low)
    # the interval moves q by the measured change of q (0.8 -> 0.75: 0.05), so it holds both trends
    assert beyond.low < 1 + 0.8 + 0.6 + 0.6 * 0.7 + 0.6 * 0.49 < beyond.high


def test_configs_at_the_same_position_average_and_their_spread_is_the_error() -> None:
    acc = m.accept_model([m.AcceptObs("a", 1, [0.5]), m.AcceptObs("b", 2, [0.7, 0.4])])
    r1, se1 = acc.reach[1]
    assert r1 == pytest.approx(0.6) and se1 == pytest.approx(0.1)  # sd 0.1414 / sqrt 2


def test_two_depths_fit_a_line_and_predict_between_and_beyond() -> None:
    pts = [m.CyclePoint("one", 1, 10.0, 0.01), m.CyclePoint("three", 3, 14.0, 0.01)]
    cyc = m.cycle_model(pts, base_step_ms=8.0, draft_step_ms=None)
    assert isinstance(cyc, m.CycleModel) and cyc.kind == "fit" and cyc.line is not None
    assert cyc.at(2).mid == pytest.approx(12.0) and cyc.at(5).mid == pytest.approx(18.0)
    assert (cyc.at(5).high - cyc.at(5).low) > (cyc.at(2).high - cyc.at(2).low)  # farther: wider
    acc = m.accept_model([m.AcceptObs("a", 3, [0.9, 0.8, 0.7], count=1e6)])
    pred = m.predict(2, acc, cyc)
    assert pred is not None and pred.predicted_tok_s == pytest.approx(2.7 * 1000 / 12.0)
    assert pred.low < pred.predicted_tok_s < pred.high


def test_one_depth_and_the_baseline_bound_the_slope_and_take_the_middle() -> None:
    """Story: 2-step cycle 20 ms, draft 2 ms a step, decode step 11.24 ms: slope 2..4.38 ms a depth."""
    ref = m.CyclePoint("two", 2, 20.0, 0.0)
    cyc = m.cycle_model([ref], base_step_ms=11.24, draft_step_ms=2.0)
    assert isinstance(cyc, m.CycleModel) and cyc.kind == "bounded" and cyc.slope_range is not None
    lo, hi = cyc.slope_range
    assert lo == 2.0 and hi == pytest.approx(2.0 + (20.0 - 4.0 - 11.24) / 2)
    at1 = cyc.at(1)
    assert at1.mid == pytest.approx(20.0 - (lo + hi) / 2)
    assert at1.low == pytest.approx(20.0 - hi) and at1.high == pytest.approx(20.0 - lo)
    assert cyc.at(4).low == pytest.approx(24.0)  # 2 more depths at the draft step alone


def test_one_depth_and_no_baseline_cannot_tell() -> None:
    why = m.cycle_model([m.CyclePoint("two", 2, 20.0)], base_step_ms=None, draft_step_ms=2.0)
    assert isinstance(why, str) and why.startswith("cannot tell") and "baseline" in why


def test_a_decode_step_longer_than_a_speculative_cycle_bounds_nothing() -> None:
    """Real vLLM CPU, second run: plain decode 25.4 ms a token, the 3-token cycle 8.4 ms."""
    why = m.cycle_model([m.CyclePoint("three", 3, 8.40, 0.145)], base_step_ms=25.37, draft_step_ms=None)
    assert isinstance(why, str) and "bounds nothing" in why and "measure another depth" in why


def test_a_cycle_falling_with_depth_is_held_flat_within_the_noise_else_cannot_tell() -> None:
    """Real vLLM CPU on a loaded 2-core box: 1 token 14.39 ms, 3 tokens 8.40 ms (noise 17 %, 15 %)."""
    noisy = [m.CyclePoint("one", 1, 14.39, 0.168), m.CyclePoint("three", 3, 8.40, 0.145)]
    cyc = m.cycle_model(noisy, base_step_ms=25.37, draft_step_ms=None)
    assert isinstance(cyc, m.CycleModel) and cyc.left_out == []  # the slow decode step judges nobody
    assert (
        cyc.line is not None
        and cyc.line.slope == 0.0
        and cyc.line.intercept == pytest.approx((14.39 + 8.40) / 2)
    )
    assert any("held at 0.00" in n for n in cyc.notes)
    quiet = [m.CyclePoint("one", 1, 14.39, 0.015), m.CyclePoint("three", 3, 8.40, 0.015)]
    why = m.cycle_model(quiet, base_step_ms=25.37, draft_step_ms=None)
    assert isinstance(why, str) and "falls with depth" in why and why.startswith("cannot tell")


def test_a_config_far_above_what_the_others_allow_is_left_out_as_another_problem() -> None:
    """The story's 3-step without NCCL tuning: 32.8 ms where at most 24.4 fits (2-step + bound)."""
    pts = [m.CyclePoint("two", 2, 20.0, 0.015), m.CyclePoint("three-nonccl", 3, 32.8, 0.015)]
    cyc = m.cycle_model(pts, base_step_ms=11.24, draft_step_ms=2.0)
    assert (
        isinstance(cyc, m.CycleModel) and cyc.kind == "bounded" and [p.config for p in cyc.points] == ["two"]
    )
    assert [p.config for p, _ in cyc.left_out] == ["three-nonccl"]
    assert "above" in cyc.left_out[0][1]
    # a config faster than the others allow is not "another problem"
    fast = [m.CyclePoint("two", 2, 20.0, 0.015), m.CyclePoint("three", 3, 22.5, 0.015)]
    kept_both = m.cycle_model(fast, 11.24, 2.0)
    assert isinstance(kept_both, m.CycleModel) and kept_both.left_out == []


def test_noise_of_repeats_and_the_floor() -> None:
    assert m.relative_noise([100.0]) is None
    assert m.relative_noise([99.0, 101.0]) == pytest.approx(2**0.5 / 100)


# --- advise over journal entries -------------------------------------------------------------------

SGL = ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--port", "30000"]


def _sglang(depth: int) -> list[str]:
    if not depth:
        return [*SGL, "--speculative-algorithm", "NONE"]
    return [*SGL, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d",
            "--speculative-num-steps", str(depth), "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", str(depth + 1)]  # fmt: skip


def _entry(
    i: int, argv: list[str], tok_s: float, bursts: dict[int, int] | None = None, **srv
) -> HistoryEntry:
    sc = None
    if bursts is not None:
        samples = [(20.0, n) for n, c in bursts.items() for _ in range(c)]
        sc = StreamCycles(n=len(samples), median_ms=20.0, tokens_exact=True, tokens_per_burst=bursts,
                          samples=samples, requests=2)  # fmt: skip
    res = BenchResult(
        profile=f"p{i}", fingerprint=f"fp{i}", argv=argv, config=BenchConfig(concurrency=1),
        decode_tok_s=tok_s, successful_requests=4, tpot_ms=LatencyStats(mean=10.0, std=0.2),
        stream_cycles=sc, server=ServerMetrics(**srv) if srv else None,
    )  # fmt: skip
    return HistoryEntry(id=i, ts=float(i), result=res)


def test_advise_one_speculative_config_and_no_baseline_cannot_tell() -> None:
    adv = advise([_entry(1, _sglang(2), 94.0, {1: 44, 2: 24, 3: 32})], None, "p1", _sglang(2), "fp1")
    assert adv.verdict.startswith("cannot tell") and "baseline" in adv.verdict and adv.best is None


def test_advise_without_per_position_acceptance_cannot_tell_the_depths_below() -> None:
    """Accept length only (no stream counts, no /metrics): depths below the measured ones cannot be told."""
    entries = [
        _entry(1, _sglang(0), 89.0),
        _entry(2, _sglang(2), 94.0, accept_len=1.88),
        _entry(3, _sglang(3), 89.4, accept_len=2.056),
    ]
    adv = advise(entries, entries[0], "p2", _sglang(2), "fp2")
    one = adv.candidate(1)
    assert one is not None and one.predicted_tok_s is None and one.note and one.note.startswith("cannot tell")
    assert adv.candidate(2).predicted_tok_s is not None and adv.candidate(3).predicted_tok_s is not None
    five = adv.candidate(5)
    assert five.predicted_tok_s is None and "conditional acceptance" in five.note  # r_2 alone unknown


def test_advise_overlapping_intervals_say_between_which_and_what_to_measure() -> None:
    entries = [
        _entry(1, _sglang(0), 89.0),
        _entry(2, _sglang(2), 94.0, {1: 44, 2: 24, 3: 32}),
    ]
    adv = advise(entries, entries[0], "p2", _sglang(2), "fp2")
    assert adv.best is not None and not adv.best.decided
    assert adv.verdict.startswith("cannot tell between depth") and adv.measure_next
    assert any(i.startswith("baseline decode step") for i in adv.inputs)
    assert adv.candidate(2).measured_by == "#2 p2"
    assert {c.depth for c in adv.candidates} == {1, 2, 3, 4}


def test_advise_a_clear_winner_is_decided_with_its_gain() -> None:
    """Acceptance near 1 and a drafter that costs nothing, verify flat: the deepest depth wins clearly."""
    bursts2, bursts4 = {3: 1000}, {5: 1000}  # every draft accepted
    entries = [
        _entry(1, _sglang(0), 100.0),
        _entry(2, _sglang(2), 3 * 1000 / 12.0, bursts2),  # cycle 12 ms
        _entry(3, _sglang(4), 5 * 1000 / 12.4, bursts4),  # cycle 12.4 ms
    ]
    adv = advise(entries, entries[0], "p2", _sglang(2), "fp2")
    assert adv.best is not None and adv.best.depth == 6 and adv.best.decided, adv.verdict
    assert adv.best.gain_pct is not None and adv.best.gain_pct > 50
    assert adv.verdict.startswith("depth 6")


def test_when_no_depth_beats_plain_decode_the_advice_says_so() -> None:
    """Every depth predicts well below the measured plain decode: speculation costs here."""
    entries = [
        _entry(1, _sglang(0), 150.0),
        _entry(2, _sglang(2), 3 * 1000 / 40.0, {3: 1000}),
        _entry(3, _sglang(4), 5 * 1000 / 60.0, {5: 1000}),
    ]
    adv = advise(entries, entries[0], "p2", _sglang(2), "fp2")
    assert adv.speculation_pays is False and adv.verdict.startswith("no depth beats plain decode (150.0")
    assert adv.baseline_tok_s == 150.0


def test_a_tree_config_is_not_advised() -> None:
    argv = [*_sglang(3)[:-4], "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "6"]
    adv = advise([_entry(1, argv, 60.0)], None, "p1", argv, "fp1")
    assert adv.verdict.startswith("cannot tell") and "topk 4" in adv.verdict


def test_depth_is_applied_to_each_engine_argv() -> None:
    sg = with_depth(_sglang(2), 4)
    assert (
        sg[sg.index("--speculative-num-steps") + 1] == "4"
        and sg[sg.index("--speculative-num-draft-tokens") + 1] == "5"
    )
    assert sg[sg.index("--speculative-eagle-topk") + 1] == "1"
    conf = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}
    vl = with_depth(["vllm", "serve", "m", "--speculative-config", json.dumps(conf)], 5)
    assert json.loads(vl[vl.index("--speculative-config") + 1]) == {**conf, "num_speculative_tokens": 5}
    assert family(vl) == "vllm ngram" and family(sg) == "sglang EAGLE3 d" and family(_sglang(0)) is None
    assert depth_flags(vl, 5).startswith(
        "--speculative-config {"
    ) and '"num_speculative_tokens": 5' in depth_flags(vl, 5)


def test_the_try_record_round_trips_through_the_journal(tmp_path) -> None:
    rec = SpecAdviceTryRecord(profile="p", config="p.try-d1", depth=1, flags="num_speculative_tokens 1",
                              predicted_tok_s=90.0, low=80.0, high=100.0, measured_tok_s=92.0,
                              error_pct=-2.17, inside=True, host="box")  # fmt: skip
    journal = Journal(tmp_path / "s")
    journal.append(rec)
    (back,) = journal.records()
    assert isinstance(back, SpecAdviceTryRecord) and back.model_dump(exclude={"ts"}) == rec.model_dump(
        exclude={"ts"}
    )


def test_the_tui_spec_panel_shows_the_advice_of_the_highlighted_config() -> None:
    import io

    from rich.console import Console

    from specdebug.tui.widgets.spec_panel import spec_renderable

    entries = [
        _entry(1, _sglang(0), 89.0),
        _entry(2, _sglang(2), 94.0, {1: 44, 2: 24, 3: 32}),
    ]
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(spec_renderable(entries, entries[0], entries[1]))
    text = console.export_text()
    assert "Which depth is fastest (spec --advise)" in text
    assert "verdict: cannot tell between depth" in text and "measure next: depth" in text


def test_advice_over_a_contended_run_says_so_and_a_quiet_one_adds_nothing() -> None:
    """The baseline's step and every cycle are client-timed: one measured on a contended CPU (core.bench
    .cpuwait) reads slow, and the advice names it; the verdict itself is the arithmetic's."""
    entries = [
        _entry(1, _sglang(0), 89.0),
        _entry(2, _sglang(2), 94.0, {1: 44, 2: 24, 3: 32}),
    ]
    quiet = advise(entries, entries[0], "p2", _sglang(2), "fp2")
    assert not any("contended" in n for n in quiet.notes), quiet.notes
    entries[0].result.client_cpu_wait = 0.4
    busy = advise(entries, entries[0], "p2", _sglang(2), "fp2")
    assert busy.verdict == quiet.verdict
    assert (
        "the advice rests on results measured on a contended CPU (#1 p1): their cycles and tok/s may be"
        " off; measure them again on a quiet machine"
    ) in busy.notes
