"""The gaps found against the servers' current sources (issue 15, section 3), one test each.

Every sample is written from the shape recorded in shared/formats/current-sources.md (the table row
named in each docstring, with the upstream file it cites) or serving-formats.md; values are invented.
"""

from __future__ import annotations

import json

import httpx
import pytest

from specdebug.core.bench.external import parse_saved_json
from specdebug.core.env.model import EnvQuery
from specdebug.core.env.report import build_report
from specdebug.core.logs.parser import LogParser
from specdebug.engines import server_env_rules
from specdebug.engines.sglang_pack import SGLANG
from specdebug.engines.vllm_pack import VLLM
from specdebug.remote.api import FileRead, ProcInfo
from specdebug.sim.server.common.engine import Engine
from specdebug.sim.server.sglang.args import MAX_RUNNING_WARNING, NGRAM_DRAFT_WARNING
from specdebug.sim.server.sglang.http import ServerState, build_app
from specdebug.sim.server.sglang.options import parse_args
from specdebug.sim.server.sglang.shapes import Shapes, scheduler_ranks, set_envs_and_config

# ---- env handling: NCCL_CUMEM_ENABLE / NCCL_NVLS_ENABLE ----------------------------------------------


def _p(pid: int, ppid: int, argv: list[str]) -> ProcInfo:
    return ProcInfo(
        pid=pid, ppid=ppid, pgid=100, sid=100, uid=0, state="S", start_ticks=1, comm="x", cmdline=argv
    )


LAUNCHER = ["python3", "-m", "sglang.launch_server", "--tp", "2"]
PROCS = [
    _p(100, 1, LAUNCHER),
    _p(101, 100, ["sglang::scheduler_TP0"]),
    _p(102, 100, ["sglang::scheduler_TP1"]),
]
CLOBBERED = b"\0" * 64


def _environ(**kv: str) -> bytes:
    return b"".join(f"{k}={v}".encode() + b"\0" for k, v in kv.items())


def _reads(envs: dict[int, bytes]) -> dict[str, FileRead]:
    return {f"/proc/{pid}/environ": FileRead(f"/proc/{pid}/environ", data) for pid, data in envs.items()}


def test_current_sglang_keeps_an_exported_nccl_cumem_enable():
    """current-sources.md "SGLang env in launcher" (engine.py `_set_envs_and_config`, index ids
    51822085073 / 193236366): NCCL_CUMEM_ENABLE is set only when not already in os.environ, so an
    exported 1 reaches the workers and must not be reported as replaced."""
    user = _environ(NCCL_CUMEM_ENABLE="1", NCCL_NVLS_ENABLE="1")
    q = EnvQuery(match="sglang::scheduler", expected={"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1"},
                 server_version="0.5.4.post1")  # fmt: skip
    rep = build_report(q, PROCS, _reads({100: user, 101: user, 102: user}))
    assert rep.summary.exit_code == 0, rep.summary.reasons
    for w in rep.workers:
        assert all(vc.status == "ok" and not vc.overwritten_by_server for vc in w.vars.values())
    assert not any("never reaches the workers" in x for x in rep.summary.warnings)
    # clobbered workers: the launcher's exported value is a fair inference again (it is kept)
    rep = build_report(q, PROCS, _reads({100: user, 101: CLOBBERED, 102: CLOBBERED}))
    vc = rep.workers[0].vars["NCCL_CUMEM_ENABLE"]
    assert (vc.status, vc.source, vc.actual, vc.overwritten_by_server) == (
        "unverifiable",
        "launcher",
        "1",
        False,
    )


def test_flags_and_older_versions_do_overwrite():
    """Same row: --enable-symm-mem forces NCCL_CUMEM_ENABLE (and NVLS), --enable-nccl-nvls forces NVLS,
    in every version; older engine.py copies (index ids 38009857313 / 196295075) assign unconditionally."""
    rules = server_env_rules("sglang", "0.5.4.post1", ["--enable-symm-mem"])
    assert rules["NCCL_CUMEM_ENABLE"].overwrites and rules["NCCL_CUMEM_ENABLE"].value == "1"
    assert rules["NCCL_NVLS_ENABLE"].overwrites and rules["NCCL_NVLS_ENABLE"].value == "1"
    rules = server_env_rules("sglang", "0.5.4.post1", ["--enable-nccl-nvls"])
    assert rules["NCCL_NVLS_ENABLE"].overwrites and rules["NCCL_CUMEM_ENABLE"].effect == "default"
    old = server_env_rules("sglang", "0.4.9", [])
    assert old["NCCL_CUMEM_ENABLE"].overwrites and "0.4.9" in old["NCCL_CUMEM_ENABLE"].note
    assert old["CUDA_DEVICE_MAX_CONNECTIONS"].value == "4"
    unknown = server_env_rules("sglang", None, [])
    assert (
        unknown["NCCL_CUMEM_ENABLE"].effect == "maybe" and "older SGLang" in unknown["NCCL_CUMEM_ENABLE"].note
    )
    assert unknown["CUDA_DEVICE_MAX_CONNECTIONS"].overwrites  # always set, every version


def test_launcher_flags_come_from_its_cmdline_and_not_exported_is_named():
    """An exported 1 with --enable-symm-mem on the launcher's command line is still "ok" (SGLang sets 1);
    a value the user never exported is explained as the server's own default, not as a replacement."""
    procs = [_p(100, 1, [*LAUNCHER, "--enable-symm-mem"]), *PROCS[1:]]
    env = _environ(NCCL_CUMEM_ENABLE="1")
    q = EnvQuery(match="sglang::scheduler", expected={"NCCL_CUMEM_ENABLE": "0"}, server_version="0.5.4.post1")
    rep = build_report(q, procs, _reads({100: env, 101: env, 102: env}))
    vc = rep.workers[0].vars["NCCL_CUMEM_ENABLE"]
    assert vc.status == "different" and vc.overwritten_by_server and "--enable-symm-mem" in vc.note
    workers = _environ(NCCL_CUMEM_ENABLE="0")
    q = EnvQuery(match="sglang::scheduler", expected={"NCCL_CUMEM_ENABLE": "1"})
    rep = build_report(q, PROCS, _reads({100: _environ(HOME="/root"), 101: workers, 102: workers}))
    assert "was not exported to the server" in rep.workers[0].vars["NCCL_CUMEM_ENABLE"].note


def test_vllm_nccl_cumem_rules_by_version():
    """serving-formats.md 4.3 item 4: old worker_base.py forced 0 inside each worker; PR #19105 (~0.9.1,
    env_override.py) keeps an explicit value; PR #24141 (~0.11) removed the override."""
    assert server_env_rules("vllm", "0.8.5")["NCCL_CUMEM_ENABLE"].overwrites
    assert server_env_rules("vllm", "0.10.1")["NCCL_CUMEM_ENABLE"].effect == "default"
    assert server_env_rules("vllm", "0.11.2") == {}
    assert server_env_rules("vllm", None)["NCCL_CUMEM_ENABLE"].effect == "maybe"


@pytest.mark.parametrize(
    ("version", "exported", "flags", "want"),
    [
        ("0.5.4.post1", {"NCCL_CUMEM_ENABLE": "1"}, {}, ("1", "0", "8")),  # guard: exported value kept
        ("0.5.4.post1", {}, {"enable_symm_mem": True}, ("1", "1", "8")),
        ("0.4.9", {"NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1"}, {}, ("0", "0", "4")),  # unconditional
    ],
)
def test_sim_applies_the_version_s_env_handling(version, exported, flags, want):
    """The sim's launcher does what that version's `_set_envs_and_config` does (same sources)."""
    env = dict(exported)
    set_envs_and_config(
        env,
        Shapes(version),
        enable_symm_mem=flags.get("enable_symm_mem", False),
        enable_nccl_nvls=flags.get("enable_nccl_nvls", False),
    )
    assert (env["NCCL_CUMEM_ENABLE"], env["NCCL_NVLS_ENABLE"], env["CUDA_DEVICE_MAX_CONNECTIONS"]) == want


# ---- bench --parse of vLLM's --save-result JSON ------------------------------------------------------


def test_vllm_save_result_spec_decode_keys():
    """current-sources.md "vllm bench serve block": --save-result adds spec_decode_acceptance_rate (%),
    _acceptance_length, _num_drafts, _draft_tokens, _accepted_tokens, _per_position_acceptance_rates
    (fractions; vllm/benchmarks/serve.py `_add_spec_decode_result`)."""
    obj = {
        "backend": "vllm", "completed": 16, "failed": 0, "duration": 20.5, "output_throughput": 400.0,
        "spec_decode_acceptance_rate": 62.5, "spec_decode_acceptance_length": 2.875, "spec_decode_num_drafts": 800,
        "spec_decode_draft_tokens": 2400, "spec_decode_accepted_tokens": 1500,
        "spec_decode_per_position_acceptance_rates": [0.8, 0.6, 0.475],
    }  # fmt: skip
    res = parse_saved_json(json.loads(json.dumps(obj)))
    assert res.source_format == "vllm" and res.accept_length == pytest.approx(2.875)
    s = res.spec
    assert (s.acceptance_rate_pct, s.drafts, s.draft_tokens, s.accepted_tokens) == (62.5, 800, 2400, 1500)
    assert s.per_position_acceptance_pct == pytest.approx([80.0, 60.0, 47.5])
    assert parse_saved_json({"completed": 3, "accept_length": 2.1, "backend": "sglang"}).spec is None


# ---- SGLang log shapes --------------------------------------------------------------------------------


def test_2024_mixed_prefill_line():
    """current-sources.md "SGLang older decode/prefill": 2024 tp_worker.py/scheduler.py (index ids
    119247421, 67109247740) `Prefill batch(mixed #running-req: N). #new-seq: ..., cache hit rate: xx.xx%,
    #queue-req: N`, behind the `[gpu_id=0]` prefix."""
    line = (
        "[gpu_id=0] Prefill batch(mixed #running-req: 3). #new-seq: 1, #new-token: 512, #cached-token: 7, "
        "cache hit rate: 1.35%, #queue-req: 2"
    )
    m = LogParser("sglang").parse(line)
    assert m is not None and m.event == "prefill_batch"
    assert m.metrics == {"running_req": 3.0, "queue_req": 2.0}
    assert m.fields["cache_hit_rate"] == 1.35 and m.fields["new_seq"] == 1
    s, e, name = next(sp for sp in m.spans if sp[2] == "running_req")
    assert m.line[s:e] == "3"
    assert LogParser("auto").parse(line).event == "prefill_batch"


def test_swa_token_usage_is_the_max_of_both_pools():
    """current-sources.md "SGLang decode line": hybrid SWA models print `#full token: N, full token usage:
    x.xx, #swa token: N, swa token usage: x.xx`; SGLang's own token usage is the max of the two pools."""
    line = (
        "[2026-01-15 12:00:01 TP0] Decode batch, #running-req: 8, #full token: 4000, full token usage: 0.12, "
        "#swa token: 9000, swa token usage: 0.61, accept len: 2.10, accept rate: 0.55, cuda graph: True, "
        "gen throughput (token/s): 99.00, #queue-req: 0"
    )
    m = LogParser("sglang").parse(line)
    assert m.metrics["token_usage"] == pytest.approx(0.61)
    s, e, _ = next(sp for sp in m.spans if sp[2] == "token_usage")
    assert m.line[s:e] == "0.61"
    plain = LogParser("sglang").parse(line.replace(", #swa token: 9000, swa token usage: 0.61", ""))
    assert plain.metrics["token_usage"] == pytest.approx(0.12)


def test_pending_token_prefill_and_current_startup_lines():
    """current-sources.md "SGLang prefill line" (current: `#pending-token: N, ` after #queue-req) and
    "SGLang startup" (`Capture {target verify|draft decode|...} CUDA graph begin. backend=full, ...`,
    `KV Cache is allocated. dtype: ...`, `Engine startup timings (s): ...`); the sim prints them with
    --server-version 0.5.6 and later, and the pack reads both."""
    shapes = Shapes("0.5.9")
    line = "[2026-01-15 12:00:01 TP0] " + shapes.prefill(
        new_seq=2, new_token=900, usage=0.05, running=1, queued=3, pending=1200, tput=4500.0
    )
    assert (
        "#queue-req: 3, #pending-token: 1200, cuda graph: False, input throughput (token/s): 4500.00" in line
    )
    m = LogParser("sglang").parse(line)
    assert m.fields["pending_token"] == 1200 and m.metrics["queue_req"] == 3.0
    assert Shapes("0.5.4.post1").era == "classic" and Shapes("0.4.9").era == "legacy"
    legacy = "[2026-01-15 12:00:01 TP0] " + Shapes("0.4.9").decode(
        running=2, used=311, usage=0.01, spec=(2.42, 0.61), graph=True, tput=0.52, queued=0
    )
    assert legacy.startswith("[2026-01-15 12:00:01 TP0] Decode batch. ") and legacy.endswith(
        "#queue-req: 0, "
    )
    assert LogParser("sglang").parse(legacy).metrics["accept_len"] == pytest.approx(2.42)
    for text, phase in (
        ("Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=3, bs=[1, 2], avail mem=9.0 GB",
         "cuda_graph"),
        ("Capture draft decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2], avail mem=8.0 GB",
         "draft_cuda_graph"),
        ("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 9000, KV size: 3.10 GB", "kv_cache"),
        ("Engine startup timings (s): load_weight=1.00, scheduler_e2e=2.00, cuda_graph={target_verify=0.50}, "
         "tokenizer_e2e=0.41", "startup_timings"),
    ):  # fmt: skip
        assert SGLANG.phase_of(f"[2026-01-15 12:00:01 TP0] {text}") == phase


def test_vllm_newest_version_line_starts_a_run():
    """vllm utils `log_version_and_model` (newest): "vLLM server version %s, serving model %s", or the
    logo whose version line ends `█ ▀▄▀ █  version X`; older "vLLM API server version X"."""
    for line in (
        "(APIServer pid=1) INFO 05-04 01:00:00 [utils.py:233] vLLM server version 0.14.0, serving model m",
        "(APIServer pid=1) INFO 05-04 01:00:00 [utils.py:233]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.14.0",
        "(APIServer pid=1) INFO 05-04 01:00:00 [api_server.py:1880] vLLM API server version 0.11.2",
    ):
        assert VLLM.restart_re.search(line) and VLLM.phase_of(line) == "args"


# ---- the sim's SGLang argument handling ---------------------------------------------------------------


def test_nextn_becomes_eagle_and_params_are_auto_chosen():
    """current-sources.md "SGLang spec arg handling" (server_args.py index ids 8356329, 53577495653):
    NEXTN -> EAGLE; without --speculative-num-steps all three come from `_auto_choose_speculative_params`:
    (3, 1, 4) for DeepSeek-V3-like models, (5, 4, 8) for Llama; max running requests 48 + warning."""
    cfg = parse_args(["--model-path", "deepseek-ai/DeepSeek-V3", "--speculative-algorithm", "NEXTN"])
    s = cfg.server
    assert s.speculative_algorithm == "EAGLE" and cfg.spec.algorithm == "EAGLE"
    assert (s.speculative_num_steps, s.speculative_eagle_topk, s.speculative_num_draft_tokens) == (3, 1, 4)
    assert s.speculative_draft_model_path == "deepseek-ai/DeepSeek-V3"  # MTP layers live in the target
    assert s.max_running_requests == 48 and MAX_RUNNING_WARNING in cfg.warnings
    llama = parse_args(
        ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--speculative-algorithm", "EAGLE3"]
    )
    assert (llama.spec.num_steps, llama.spec.topk, llama.spec.num_draft_tokens) == (5, 4, 8)
    mine = parse_args(["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2",
                       "--max-running-requests", "16"])  # fmt: skip
    assert mine.server.max_running_requests == 16 and MAX_RUNNING_WARNING not in mine.warnings


def test_topk_or_draft_tokens_without_steps_is_an_error():
    """Same row: `assert topk is None and num_draft_tokens is None` when num_steps is None (not filled
    one by one); the launcher exits 1 with the traceback."""
    with pytest.raises(AssertionError):
        parse_args(["--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "4"])
    from specdebug.sim.server.sglang.launcher import main

    assert main(["--speculative-algorithm", "EAGLE3", "--speculative-num-draft-tokens", "4"]) == 1


def test_ngram_defaults():
    """Same row (speculative hook, index id 56740725599): NGRAM topk = ngram max BFS breadth (10), draft
    tokens 12 by default with a warning, steps = draft tokens // topk."""
    cfg = parse_args(["--speculative-algorithm", "NGRAM"])
    s = cfg.server
    assert (s.speculative_eagle_topk, s.speculative_num_draft_tokens, s.speculative_num_steps) == (10, 12, 1)
    assert NGRAM_DRAFT_WARNING in cfg.warnings and MAX_RUNNING_WARNING in cfg.warnings


def test_process_titles_and_prefixes_with_dp_pp_ep():
    """current-sources.md "SGLang process title": `sglang::scheduler{prefix}` with prefix ` DP{d}` (dp) +
    ` PP{p}` (pp > 1) + ` TP{t}` (tp > 1) + ` EP{e}` (ep > 1); older versions always ` TP{t}`."""
    ranks = scheduler_ranks(4, 1, 2, 4, dp_attention=True)
    assert [r.title for r in ranks] == [
        "sglang::scheduler_DP0_TP0_EP0", "sglang::scheduler_DP0_TP1_EP1",
        "sglang::scheduler_DP1_TP2_EP2", "sglang::scheduler_DP1_TP3_EP3",
    ]  # fmt: skip
    assert ranks[2].prefix == " DP1 TP2 EP2"
    pp = scheduler_ranks(2, 2)
    assert [r.prefix for r in pp] == [" PP0 TP0", " PP0 TP1", " PP1 TP0", " PP1 TP1"]
    assert scheduler_ranks(1)[0].title == "sglang::scheduler"
    assert scheduler_ranks(1, legacy=True)[0].title == "sglang::scheduler_TP0"
    assert len(scheduler_ranks(2, dp_size=2)) == 4  # DP groups without DP attention: one scheduler per rank


async def test_endpoint_shapes():
    """current-sources.md "SGLang HTTP" / "SGLang Prometheus": /model_info keys, /get_load entries
    {dp_rank, num_reqs, num_waiting_reqs, num_tokens, num_pending_tokens, ts_tic}, /server_info =
    server_args + scheduler info + internal_states + version, /metrics labels incl. moe_ep_rank."""
    cfg = parse_args(["--enable-metrics", "--server-version", "0.5.9", "--speculative-algorithm", "EAGLE3",
                      "--speculative-num-steps", "2"])  # fmt: skip
    engine = Engine(cfg.spec, log=lambda m: None, seed=0, max_total_tokens=1000, max_running=4,
                    decode_log_interval=10, cuda_graph=True)  # fmt: skip
    app = build_app(ServerState(cfg, engine, ready=True, max_total_num_tokens=1000, max_req_input_len=900))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim") as c:
        info = (await c.get("/model_info")).json()
        assert {"model_path", "tokenizer_path", "is_generation", "preferred_sampling_params", "weight_version",
                "has_image_understanding", "has_audio_understanding"} <= set(info)  # fmt: skip
        (load,) = (await c.get("/get_load")).json()
        assert set(load) == {
            "dp_rank",
            "num_reqs",
            "num_waiting_reqs",
            "num_tokens",
            "num_pending_tokens",
            "ts_tic",
        }
        server = (await c.get("/server_info")).json()
        assert server["version"] == "0.5.9" and server["speculative_num_steps"] == 2
        assert server["max_total_num_tokens"] == 1000 and isinstance(server["internal_states"], list)
        text = (await c.get("/metrics")).text
        assert "sglang:spec_accept_length{model_name=" in text and 'moe_ep_rank="0"' in text
        assert 'tp_rank="0"' in text and 'pp_rank="0"' in text


# ---- the `[EAGLE3 profile] ... Target verify` line ----------------------------------------------------


def test_target_verify_line_is_user_instrumentation():
    """current-sources.md "SGLang 'Target verify' timing line": SGLang prints no per-step verify timing
    (only CUDA-graph capture names `target verify`), so the line is not one of SGLang's events: every
    pack reads it as user instrumentation (event `timing`, engines.pack.TIMINGS_COMMON, issue 38),
    and an example profile's own [patterns] entry of the same name still replaces the pack's reading."""
    from pathlib import Path

    from specdebug.core.profiles import load_profile

    line = "[2026-01-15 12:00:01 TP0] [EAGLE3 profile] step=10 draft: 4.01 ms, Target verify: 19.02 ms, accept: 2"
    own = LogParser("sglang").parse(line)
    assert own is not None and own.event == "timing" and own.metrics == {"verify_ms": 19.02, "draft_ms": 4.01}
    # a startup line naming `target verify`: no timing
    capture = "[2026-01-15 12:00:01 TP0] Capture target verify CUDA graph end. elapsed=1.20 s"
    assert LogParser("sglang").parse(capture).metrics == {}
    examples = Path(__file__).resolve().parents[2] / "examples"
    profile = load_profile(examples / "eagle3-2step-nccl.toml")
    m = LogParser("sglang", patterns=profile.patterns).parse(line)
    assert m is not None and m.metrics["verify_ms"] == pytest.approx(19.02)
    readme = (examples / "README.md").read_text()
    assert "user's own instrumentation" in readme
