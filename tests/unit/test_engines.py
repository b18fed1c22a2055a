"""The engine adapters: one registry, one ready line per engine, multi-node launch arguments."""

from __future__ import annotations

import pytest

from specdebug.engines import (
    ENGINE_NAMES,
    ENGINES,
    PACKS,
    engine_of,
    get_engine,
    server_env_rules,
    worker_match,
)
from specdebug.engines.base import Engine


def test_registry_lists_every_engine_once():
    assert ENGINE_NAMES == ("sglang", "vllm")
    assert tuple(ENGINES) == ENGINE_NAMES == tuple(PACKS)
    for name in ENGINE_NAMES:
        engine: Engine = get_engine(name)
        assert engine.name == name and engine.pack.name == name
    assert engine_of("custom") is None and engine_of(None) is None


def test_an_unknown_engine_is_one_clear_error():
    with pytest.raises(ValueError, match=r"unknown engine 'trtllm' \(choose from sglang, vllm\)"):
        get_engine("trtllm")


@pytest.mark.parametrize("name", ["sglang", "vllm"])
def test_the_ready_line_is_one_fact(name):
    """The pack's ready pattern is the engine's ready line itself (what bench greps for on the box)."""
    engine = get_engine(name)
    assert engine.pack.ready_re.pattern == engine.ready_line
    assert engine.pack.is_ready(f"INFO 01-01 00:00:00 [x.py:1] {engine.ready_line}.")
    assert engine.pack.is_warmup_done(engine.ready_line)
    assert engine.phases[0] == "launch" and engine.phases[-1] == "ready"


def test_sglang_node_args():
    sg = get_engine("sglang")
    assert sg.node_args(1, 0, "10.0.0.1", 20000) == []
    assert sg.node_args(2, 1, "10.0.0.1", 20000) == [
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--dist-init-addr",
        "10.0.0.1:20000",
    ]
    assert sg.node_args(2, 0, "fd00::1", 20000)[-1] == "[fd00::1]:20000"


def test_vllm_node_args_make_the_workers_headless():
    vl = get_engine("vllm")
    head = ["--nnodes", "3", "--node-rank", "0", "--master-addr", "node0", "--master-port", "29501"]
    assert vl.node_args(3, 0, "node0", 29501) == head
    assert vl.node_args(3, 2, "node0", 29501) == [*head[:3], "2", *head[4:], "--headless"]
    assert vl.node_args(1, 0, "node0", 29501) == []


@pytest.mark.parametrize(
    "args, problem",
    [
        ((2, 2, "h", 1), "outside a group of 2"),
        ((0, 0, "h", 1), "outside a group of 0"),
        ((2, 0, "h", 0), "port 0"),
        ((2, 0, "--evil", 1), "starts with '-'"),
        ((2, 0, "a b", 1), "has spaces"),
    ],
)
def test_node_args_refuse_a_bad_placement(args, problem):
    for engine in ENGINES.values():
        with pytest.raises(ValueError, match=problem):
            engine.node_args(*args)


def test_env_rules_and_workers_come_from_the_engines():
    assert server_env_rules("custom") == {}
    assert "CUDA_MODULE_LOADING" in server_env_rules("sglang", "0.5.4")
    assert worker_match() == r"^(sglang::scheduler|VLLM::(Worker|EngineCore))"


def test_prom_names_carry_their_engine_prefix():
    for engine in ENGINES.values():
        names = [n for _, group in engine.prom.gauges for n in group]
        names += [engine.prom.generation_tokens, *engine.prom.mean_names]
        assert names and all(n.startswith(engine.prom.prefix) for n in names if n)


def test_undecided_parser_keeps_warmup_open_past_a_shared_banner():
    """Before the engine is known, uvicorn's banner (every engine prints it before its own warmup)
    does not end warmup; a warmup-done line only one engine knows does."""
    from specdebug.core.logs.parser import LogParser

    parser = LogParser("auto")
    parser.parse("INFO:     Application startup complete.")
    assert parser.pack is None and parser.in_warmup
    parser.parse("Warmup ended")
    assert parser.pack is None and not parser.in_warmup and parser.marker_seen


def test_each_engine_reads_only_its_own_speculative_flags():
    sg, vl = get_engine("sglang"), get_engine("vllm")
    sglang_flags = {"--speculative-algorithm": ["EAGLE"], "--speculative-num-steps": ["2"]}
    vllm_flags = {"--speculative-config": ['{"num_speculative_tokens": 3}']}
    assert sg.spec_shape(sglang_flags) == (True, 3, None, "--speculative-num-steps + 1 (topk 1)")
    assert vl.spec_shape(vllm_flags) == (True, 4, None, "--speculative-config num_speculative_tokens + 1")
    assert sg.spec_shape(vllm_flags) is None and vl.spec_shape(sglang_flags) is None
    assert sg.spec_shape({"--speculative-algorithm": ["none"]}) == (
        False,
        1,
        None,
        "--speculative-algorithm none",
    )
