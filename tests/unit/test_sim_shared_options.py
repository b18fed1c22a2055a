"""The sim-only flags both engines share come from one place (sim.server.common.simonly) and mean the same on each."""

from __future__ import annotations

import pytest

from specdebug.sim.server.common.simonly import COMMON_FIELDS, CommonSimOptions
from specdebug.sim.server.sglang.options import SimConfig, parse_args
from specdebug.sim.server.vllm.args import VllmConfig, parse_vllm_args

SHARED = [
    *("--log-file", "/tmp/x.log", "--time-scale", "0.05", "--drop-env", "NCCL_"),
    *("--fail-requests", "0.25", "--noise", "0.03", "--noise-seed", "7", "--decode-scale", "0.5"),
    *("--slowdown-file", "/tmp/slow", "--never-join", "--die-after-ready", "2", "--nccl-timeout-after", "3"),
]
VLLM = ["--engine", "vllm", "serve", "m"]


def common(opts: CommonSimOptions) -> dict:
    return {name: getattr(opts, name) for name in COMMON_FIELDS}


def test_both_engines_read_the_same_shared_options() -> None:
    sglang, vllm = parse_args(SHARED).sim, parse_vllm_args([*VLLM, *SHARED]).sim
    assert isinstance(sglang, CommonSimOptions) and isinstance(vllm, CommonSimOptions)
    assert common(sglang) == common(vllm)
    assert common(vllm) == {
        "log_file": "/tmp/x.log",
        "time_scale": 0.05,
        "drop_env": ["NCCL_"],
        "fail_requests": 0.25,
        "noise": 0.03,
        "noise_seed": 7,
        "decode_scale": 0.5,
        "slowdown_file": "/tmp/slow",
        "never_join": True,
        "die_after_ready": 2.0,
        "nccl_timeout_after": 3.0,
        # the cost model's shape (the advisor's benchmark boxes): not given here, the story's box
        "draft_step_ms": None,
        "verify_base_ms": None,
        "verify_per_token_ms": None,
        "accept": None,
    }
    assert common(parse_args([]).sim) == common(parse_vllm_args(VLLM).sim) == common(CommonSimOptions())


def test_shared_options_survive_the_trip_to_the_children() -> None:
    sglang = parse_args(SHARED)
    assert SimConfig.from_dict(sglang.to_dict()).sim == sglang.sim
    vllm = parse_vllm_args([*VLLM, *SHARED])
    assert VllmConfig.from_dict(vllm.to_dict()).sim == vllm.sim


@pytest.mark.parametrize(
    "flag,value", [("--decode-scale", "-1"), ("--fail-requests", "1.5"), ("--noise", "0.9"), ("--noise", "x")]
)
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_out_of_range_values_are_usage_errors_on_both(engine: str, flag: str, value: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        if engine == "vllm":
            parse_vllm_args([*VLLM, flag, value])
        else:
            parse_args([flag, value])
    assert exc.value.code == 2 and flag in capsys.readouterr().err


def test_shared_flags_are_not_server_arguments() -> None:
    vllm = parse_vllm_args([*VLLM, *SHARED])
    assert not {"decode_scale", "fail_requests", "noise"} & set(vars(vllm.args))
    assert "decode_scale" not in repr(parse_args(SHARED).server)
