"""The sim's cost model: calibration targets, acceptance sampling, batching and the NCCL penalty."""

from __future__ import annotations

import random

import pytest

from specdebug.sim.server.common import costmodel as cm
from specdebug.sim.server.common.costmodel import AcceptSampler, SpecConfig

BASELINE = SpecConfig()
EAGLE_2STEP = SpecConfig("EAGLE3", num_steps=2, topk=1, num_draft_tokens=3)
EAGLE_3STEP = SpecConfig("EAGLE3", num_steps=3, topk=4, num_draft_tokens=6)


def test_calibration_targets() -> None:
    assert cm.expected_rate(BASELINE) == pytest.approx(89.0, rel=0.005)
    assert cm.expected_rate(EAGLE_2STEP, nccl_missing=0) == pytest.approx(94.0, rel=0.005)
    assert cm.expected_rate(EAGLE_3STEP, nccl_missing=3) == pytest.approx(60.0, rel=0.005)
    assert cm.step_cost(EAGLE_3STEP, nccl_missing=3).verify_ms == pytest.approx(30.0, rel=0.01)
    assert cm.step_cost(EAGLE_3STEP, nccl_missing=0).verify_ms == pytest.approx(19.0, rel=0.01)


def test_nccl_penalty_counts_missing_vars_across_workers() -> None:
    full = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}
    assert cm.missing_nccl_vars([full, full]) == 0
    assert cm.missing_nccl_vars([full, {"NCCL_PROTO": "LL"}]) == 2  # one rank lacks two of them
    assert cm.missing_nccl_vars([]) == 3
    assert cm.verify_penalty(0) == 1.0
    assert 1.0 < cm.verify_penalty(1) < cm.verify_penalty(2) < cm.verify_penalty(3)
    # baseline decode has no verify, so no penalty
    assert cm.step_cost(BASELINE, nccl_missing=3) == cm.step_cost(BASELINE, nccl_missing=0)


def test_accept_length_distribution() -> None:
    dist = cm.accept_length_distribution(EAGLE_3STEP)
    assert len(dist) == EAGLE_3STEP.num_steps + 1
    assert sum(dist) == pytest.approx(1.0)
    assert cm.accept_length_distribution(BASELINE) == [1.0]
    # a wider tree (more draft tokens per level) accepts more
    narrow = SpecConfig("EAGLE3", num_steps=3, topk=1, num_draft_tokens=4)
    assert cm.expected_accept_length(EAGLE_3STEP) > cm.expected_accept_length(narrow)


def test_sampler_is_seeded_and_realises_the_mean_quickly() -> None:
    a = AcceptSampler(EAGLE_2STEP, random.Random(7))
    b = AcceptSampler(EAGLE_2STEP, random.Random(7))
    seq = [a.next() for _ in range(40)]
    assert seq == [b.next() for _ in range(40)]
    assert set(seq) <= {1, 2, 3} and len(set(seq)) > 1
    for seed in range(20):
        s = AcceptSampler(EAGLE_3STEP, random.Random(seed))
        mean = sum(s.next() for _ in range(40)) / 40
        assert mean == pytest.approx(cm.expected_accept_length(EAGLE_3STEP), rel=0.035)


def test_batching_lowers_per_stream_rate_and_raises_throughput() -> None:
    for spec in (BASELINE, EAGLE_2STEP, EAGLE_3STEP):
        rates = [cm.expected_rate(spec, bs) for bs in (1, 2, 4, 8)]
        assert rates == sorted(rates, reverse=True)
        totals = [r * bs for r, bs in zip(rates, (1, 2, 4, 8), strict=True)]
        assert totals == sorted(totals)


def test_no_cuda_graph_is_slower() -> None:
    assert cm.expected_rate(BASELINE, cuda_graph=False) < cm.expected_rate(BASELINE)
