"""Sim flag parsing: SGLang names, SGLang's own adjustments, and the `specdebug sim` verb forwarding."""

from __future__ import annotations

import argparse

import pytest

from specdebug.sim import FAULT_PHASES, PHASES
from specdebug.sim.server.sglang.options import TOPK1_ADJUST_WARNING, ServerArgs, SimConfig, parse_args


def test_sglang_flag_names_and_aliases() -> None:
    cfg = parse_args(
        ["--model-path", "m", "--tp", "8", "--port", "1234", "--speculative-algorithm", "eagle3",
         "--speculative-num-steps", "2", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "3",
         "--enable-metrics", "--decode-log-interval", "10", "--speculative-draft-model", "d"]
    )  # fmt: skip
    s = cfg.server
    assert (s.model_path, s.tp_size, s.port, s.speculative_algorithm) == ("m", 8, 1234, "EAGLE3")
    assert s.speculative_draft_model_path == "d" and s.enable_metrics and s.decode_log_interval == 10
    assert cfg.spec.enabled and (cfg.spec.num_steps, cfg.spec.topk, cfg.spec.num_draft_tokens) == (2, 1, 3)
    assert parse_args(["--tp-size", "2"]).server.tp_size == 2
    assert not parse_args(["--speculative-algorithm", "NONE"]).spec.enabled
    assert not parse_args([]).spec.enabled


def test_topk1_adjusts_draft_tokens_like_sglang() -> None:
    cfg = parse_args(["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                      "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "6"])  # fmt: skip
    assert cfg.spec.num_draft_tokens == 4
    assert TOPK1_ADJUST_WARNING in cfg.warnings
    cfg = parse_args(["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                      "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "6"])  # fmt: skip
    assert cfg.spec.num_draft_tokens == 6 and TOPK1_ADJUST_WARNING not in cfg.warnings


def test_sim_flags_stay_out_of_server_args() -> None:
    cfg = parse_args(["--log-file", "x.log", "--time-scale", "0.05", "--seed", "3", "--fail-at", "kv_cache",
                      "--drop-env", "NCCL_", "--drop-env", "FOO", "--oom", "--profile-verify"])  # fmt: skip
    assert cfg.sim.log_file == "x.log" and cfg.sim.time_scale == 0.05 and cfg.sim.seed == 3
    assert cfg.sim.fail_at == "kv_cache" and cfg.sim.drop_env == ["NCCL_", "FOO"] and cfg.sim.oom
    text = repr(cfg.server)
    assert text.startswith("ServerArgs(model_path=") and "log_file" not in text and "time_scale" not in text
    assert SimConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("argv", [["--no-such-flag"], ["--fail-at", "nowhere"], ["--tp", "x"]])
def test_bad_flags_exit_2(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(argv)
    assert info.value.code == 2


def test_phases_are_ordered_and_faults_known() -> None:
    assert PHASES[0] == "init" and PHASES[-1] == "ready"
    assert (
        PHASES.index("load_weights")
        < PHASES.index("cuda_graph")
        < PHASES.index("http")
        < PHASES.index("warmup")
    )
    assert set(FAULT_PHASES) <= set(PHASES)


def test_address_for_wildcard_host() -> None:
    assert ServerArgs(host="0.0.0.0", port=5).address() == ("127.0.0.1", 5)


def test_verb_forwards_every_argument(monkeypatch) -> None:
    from specdebug.verbs import sim as verb

    parser = argparse.ArgumentParser()
    verb.register(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(["sim", "--tp", "2", "--help", "--port", "3"])
    assert args.sim_args == ["--tp", "2", "--help", "--port", "3"]
    seen = []
    monkeypatch.setattr(
        "specdebug.sim.server.sglang.launcher.main", lambda argv, **kw: seen.append(argv) or 0
    )
    assert args.func(args) == 0 and seen == [["--tp", "2", "--help", "--port", "3"]]
