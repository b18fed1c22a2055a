"""The speculation arithmetic (core.spec) on the story's figures, checked by hand."""

from __future__ import annotations

import pytest

from specdebug.core.bench.models import BenchConfig, BenchResult, ServerMetrics
from specdebug.core.report import HistoryEntry
from specdebug.core.spec import arith
from specdebug.core.spec.analyze import analyze
from specdebug.core.spec.points import spec_shape

SPEC2 = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1"]
NCCL = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}


def test_cycle_prediction_and_break_even_by_hand():
    cycle = arith.cycle_ms(4.0, 16.0)
    assert cycle == 20.0
    assert arith.predicted_tok_s(1.88, cycle) == pytest.approx(94.0)
    assert arith.break_even_accept_len(cycle, 1000 / 89) == pytest.approx(20 * 89 / 1000)
    assert arith.step_ms_of(0) is None and arith.predicted_tok_s(2, 0) is None


def test_line_fit_and_flag():
    line = arith.fit_line([(1, 11.0), (3, 16.0), (5, 21.0)])
    assert line is not None and line.slope == pytest.approx(2.5) and line.at(6) == pytest.approx(23.5)
    assert arith.fit_line([(3, 16.0), (3, 17.0)]) is None  # one token count: no line
    assert arith.flagged(30.0, 23.0) and not arith.flagged(25.0, 23.0)


@pytest.mark.parametrize(
    ("argv", "spec", "tokens"),
    [
        (["python3", "-m", "x", "--speculative-algorithm", "NONE"], False, 1),
        (["python3", "-m", "x"], False, 1),
        (["x", *SPEC2], True, 3),
        (["x", *SPEC2, "--speculative-num-draft-tokens", "6"], True, 6),
        (
            [
                "vllm",
                "serve",
                "m",
                "--speculative-config",
                '{"method": "eagle3", "num_speculative_tokens": 3}',
            ],
            True,
            4,
        ),
        (["x", "--speculative-algorithm", "EAGLE", "--speculative-eagle-topk", "4"], True, None),
    ],
)
def test_tokens_verified_per_cycle_from_argv(argv, spec, tokens):
    got = spec_shape(argv)
    assert got[0] is spec and got[1] == tokens


def _entry(i, name, argv, env, tok_s, *, draft=None, verify=None, accept=None):
    extra = {"draft_ms": draft} if draft is not None else {}
    res = BenchResult(
        profile=name,
        fingerprint=name,
        argv=["python3", "-m", "sglang.launch_server", *argv],
        env=env,
        decode_tok_s=tok_s,
        config=BenchConfig(concurrency=1),
        server=ServerMetrics(verify_ms=verify, accept_len=accept, extra=extra),
    )
    return HistoryEntry(id=i, ts=float(i), result=res)


STORY = [
    _entry(1, "baseline", ["--speculative-algorithm", "NONE"], {}, 89.0),
    _entry(
        2,
        "2step",
        [*SPEC2, "--speculative-num-draft-tokens", "3"],
        NCCL,
        94.0,
        draft=4,
        verify=16,
        accept=1.88,
    ),
    _entry(
        3,
        "3step",
        [
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "4",
            "--speculative-num-draft-tokens",
            "6",
        ],
        {},
        61.0,
        draft=6,
        verify=30,
        accept=2.2,
    ),
]


def test_story_session_predicts_and_flags_the_3step_verify():
    base, configs = analyze(STORY)
    assert base is not None and base.step_ms == pytest.approx(1000 / 89)
    by = {c.point.profile: c for c in configs}
    assert by["2step"].predicted_tok_s == pytest.approx(94.0)
    assert by["3step"].predicted_tok_s == pytest.approx(2.2 * 1000 / 36)
    assert by["3step"].break_even_accept_len == pytest.approx(36 / (1000 / 89))
    # fit for 3step: baseline step as 1-token point + 2step (3 tokens, 16 ms) -> about 23 ms at 6 tokens
    three = by["3step"]
    assert three.fit_verify_ms == pytest.approx(16 + 3 * (16 - 1000 / 89) / 2)
    assert three.verify_flagged and not by["2step"].verify_flagged
    causes = {c.cause: c.evidence for c in three.causes}
    nccl = next(e for k, e in causes.items() if "NCCL" in k)
    assert any("NCCL_PROTO: 'LL' in #2 2step, absent in #3 3step" in e for e in nccl)
    assert any("topk 4" in e for k, e in causes.items() for e in e if "CUDA graph" in k)


def test_cannot_tell_without_enough_configs():
    base, configs = analyze([STORY[2]])
    assert base is None
    (three,) = configs
    assert three.fit_verify_ms is None and not three.verify_flagged
    assert three.break_even_accept_len is None
    assert any("cannot tell" in n for n in three.notes)
    assert three.predicted_tok_s == pytest.approx(2.2 * 1000 / 36)  # needs no baseline


def test_failed_and_concurrent_results_do_not_enter_the_fit():
    failed = _entry(
        4, "2step-b", [*SPEC2, "--speculative-num-draft-tokens", "4"], NCCL, 1.0, draft=4, verify=90
    )
    failed.result.status = "failed"
    _, configs = analyze([*STORY, failed])
    assert "2step-b" not in {c.point.profile for c in configs}


def test_drift_between_results_is_a_cause():
    gpu = {"index": "3", "power.limit": "700.00"}
    snap = {"packages": {}, "gpus": [gpu]}
    entries = [e.model_copy() if hasattr(e, "model_copy") else e for e in STORY]
    two = entries[1].result.model_copy(update={"drift": snap})
    three = entries[2].result.model_copy(
        update={"drift": {**snap, "gpus": [{**gpu, "power.limit": "450.00"}]}}
    )
    story = [entries[0], HistoryEntry(2, 2.0, two), HistoryEntry(3, 3.0, three)]
    _, configs = analyze(story)
    causes = {c.cause: c.evidence for c in configs[-1].causes}
    assert causes["the box changed between these results (drift snapshots)"] == [
        "#2 -> #3: GPU 3 power limit 700 -> 450 W"
    ]
