"""The sim's HTTP API (starlette under uvicorn, like SGLang's FastAPI app): native + OpenAI endpoints.

Shapes follow SGLang's http_server.py / openai protocol: /health is 503 until warmup is done,
/v1/models says owned_by "sglang", streaming answers are SSE `data: {...}` chunks ending with
`data: [DONE]`, and `stream_options.include_usage` adds a final usage-only chunk
(`continuous_usage_stats` also puts the running usage in every chunk, as SGLang and vLLM do).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from specdebug.sim.server.common import faults
from specdebug.sim.server.common.engine import HISTOGRAM_BUCKETS, Engine, Finish, Histogram, count_tokens
from specdebug.sim.server.common.logsink import launcher_sink
from specdebug.sim.server.common.openai_api import (
    StopScanner,
    chunks,
    json_body,
    openai_response,
    refuse_native,
    sse,
    stop_list,
    texts,
    whole_text,
)
from specdebug.sim.server.sglang.options import SimConfig
from specdebug.sim.server.sglang.shapes import Shapes

HEALTH_GENERATE_TIMEOUT_S = 20.0


@dataclass
class ServerState:
    """What the endpoints read: config, the engine and the scheduler-reported facts."""

    cfg: SimConfig
    engine: Engine
    ready: bool = False
    max_total_num_tokens: int = 0
    max_req_input_len: int = 0
    memory: dict[str, float] = field(default_factory=dict)
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def model_id(self) -> str:
        s = self.cfg.server
        return s.served_model_name or s.model_path


def build_app(state: ServerState) -> Starlette:
    request_faults = faults.RequestFaults(state.cfg.sim.fail_requests)
    engine = state.engine

    async def health(request: HttpRequest) -> Response:
        return Response(status_code=200 if state.ready else 503)

    async def health_generate(request: HttpRequest) -> Response:
        if not state.ready:
            return Response(status_code=503)
        req = engine.submit(1, 1, ignore_eos=True)
        try:
            async with asyncio.timeout(HEALTH_GENERATE_TIMEOUT_S):
                async for _ in chunks(engine, req):
                    pass
        except TimeoutError:
            return Response(status_code=503)
        return Response(status_code=200)

    async def model_info(request: HttpRequest) -> Response:
        s = state.cfg.server
        if request.url.path == "/get_model_info" and Shapes(state.cfg.sim.server_version).era == "current":
            sink = launcher_sink()
            if sink is not None:
                sink.warning(
                    "Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                    "Please use '/model_info' instead."
                )
        return JSONResponse(
            {
                "model_path": s.model_path,
                "tokenizer_path": s.tokenizer_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": "deepseek_v3",
                "architectures": ["DeepseekV3ForCausalLM"],
            }
        )

    async def server_info(request: HttpRequest) -> Response:
        internal: dict[str, Any] = {
            "last_gen_throughput": round(engine.stats.last_gen_throughput, 2),
            "memory_usage": {**state.memory, "token_capacity": state.max_total_num_tokens},
            "load": len(engine.running) + len(engine.waiting),
        }
        if state.cfg.spec.enabled and engine.stats.cum_verify:
            internal["avg_spec_accept_length"] = engine.stats.avg_spec_accept_length
        info = {
            **asdict(state.cfg.server),
            "max_total_num_tokens": state.max_total_num_tokens,
            "max_req_input_len": state.max_req_input_len,
            "internal_states": [internal],
            "version": state.cfg.sim.server_version,
        }
        return JSONResponse(info)

    async def models(request: HttpRequest) -> Response:
        s = state.cfg.server
        card = {
            "id": state.model_id,
            "object": "model",
            "created": state.created,
            "owned_by": "sglang",
            "root": s.model_path,
            "max_model_len": s.context_length or 131072,
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def get_load(request: HttpRequest) -> Response:
        """The deprecated shim's shape: one entry per DP rank (http_server.py, current-sources.md)."""
        return JSONResponse(
            [
                {
                    "dp_rank": 0,
                    "num_reqs": len(engine.running) + len(engine.waiting),
                    "num_waiting_reqs": len(engine.waiting),
                    "num_tokens": engine.used_tokens,
                    "num_pending_tokens": sum(r.prompt_tokens for r in engine.waiting),
                    "ts_tic": time.time(),
                }
            ]
        )

    async def flush_cache(request: HttpRequest) -> Response:
        return PlainTextResponse(
            "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n"
        )

    async def metrics(request: HttpRequest) -> Response:
        if not state.cfg.server.enable_metrics:
            return PlainTextResponse("Not Found", status_code=404)
        return PlainTextResponse(render_metrics(state), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def generate(request: HttpRequest) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        text = body.get("text") or ""
        if isinstance(text, list):
            text = text[0] if text else ""
        ids = body.get("input_ids")
        sp = body.get("sampling_params") or {}
        refused = refuse_native(sp, body)  # n > 1, return_logprob: refused, never ignored
        if refused is not None:
            return refused
        prompt_tokens = len(ids) if isinstance(ids, list) else count_tokens(str(text))
        req = engine.submit(
            prompt_tokens, int(sp.get("max_new_tokens", 128)), ignore_eos=bool(sp.get("ignore_eos"))
        )
        scanner = StopScanner(stop_list(sp.get("stop")) or [])

        def meta(finish: Finish | None) -> dict[str, Any]:
            reason = None
            if finish is not None:
                reason = (
                    {"type": finish.reason, "length": req.generated}
                    if finish.reason == "length"
                    else {
                        "type": finish.reason,
                        "matched": finish.matched_stop,
                    }
                )
            m: dict[str, Any] = {
                "id": req.rid,
                "finish_reason": reason,
                "prompt_tokens": req.prompt_tokens,
                "completion_tokens": req.generated,
                "cached_tokens": 0,
                "e2e_latency": time.monotonic() - req.created,
            }
            if state.cfg.spec.enabled:
                m["spec_verify_ct"] = req.verify_ct
            return m

        if body.get("stream"):

            async def stream() -> AsyncIterator[bytes]:
                out = ""
                async for item in texts(engine, req, scanner):
                    if isinstance(item, Finish):
                        yield sse({"text": out, "meta_info": meta(item)})
                    else:
                        out += item
                        yield sse({"text": out, "meta_info": meta(None)})
                yield b"data: [DONE]\n\n"

            return StreamingResponse(stream(), media_type="text/event-stream")
        out, finish = await whole_text(engine, req, scanner)
        return JSONResponse({"text": out, "meta_info": meta(finish)})

    async def openai(request: HttpRequest, chat: bool) -> Response:
        return await openai_response(
            engine, state.model_id, request, chat=chat, request_faults=request_faults
        )

    async def completions(request: HttpRequest) -> Response:
        return await openai(request, chat=False)

    async def chat_completions(request: HttpRequest) -> Response:
        return await openai(request, chat=True)

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/health_generate", health_generate, methods=["GET"]),
        Route("/get_model_info", model_info, methods=["GET"]),
        Route("/model_info", model_info, methods=["GET"]),
        Route("/get_server_info", server_info, methods=["GET"]),
        Route("/server_info", server_info, methods=["GET"]),
        Route("/get_load", get_load, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/flush_cache", flush_cache, methods=["POST", "GET"]),
        Route("/generate", generate, methods=["POST", "PUT"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ]
    return Starlette(routes=routes)


def _histogram(name: str, help_text: str, h: Histogram, labels: str) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    for bound, n in zip(HISTOGRAM_BUCKETS, h.counts, strict=True):
        lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {float(n)}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(h.count)}')
    lines.append(f"{name}_sum{{{labels}}} {h.total}")
    lines.append(f"{name}_count{{{labels}}} {float(h.count)}")
    return lines


def render_metrics(state: ServerState) -> str:
    """Prometheus text with SGLang's metric names (gauges of the last decode-log interval)."""
    e = state.engine
    labels = f'model_name="{state.model_id}",engine_type="unified",tp_rank="0",pp_rank="0",moe_ep_rank="0"'
    if state.cfg.server.dp_size > 1:
        labels += ',dp_rank="0"'
    gauges = {
        "sglang:num_running_reqs": ("The number of running requests.", len(e.running)),
        "sglang:num_used_tokens": ("The number of used tokens.", e.used_tokens),
        "sglang:token_usage": ("The token usage.", e.used_tokens / e.max_total_tokens),
        "sglang:gen_throughput": ("The generation throughput (token/s).", e.stats.last_gen_throughput),
        "sglang:num_queue_reqs": ("The number of requests in the waiting queue.", len(e.waiting)),
        "sglang:cache_hit_rate": ("The prefix cache hit rate.", 0.0),
        "sglang:spec_accept_length": (
            "The average acceptance length of speculative decoding.",
            e.stats.last_accept_len,
        ),
        "sglang:spec_accept_rate": (
            "The average acceptance rate of speculative decoding.",
            e.stats.last_accept_rate,
        ),
        "sglang:max_total_num_tokens": (
            "Maximum total number of tokens in the KV cache.",
            state.max_total_num_tokens,
        ),
    }
    newest = Shapes(state.cfg.sim.server_version).newest
    spec = state.cfg.spec
    if newest and spec.enabled:  # 0.5.23: the live speculative settings
        gauges["sglang:spec_num_steps"] = ("The number of speculative steps.", spec.num_steps)
        gauges["sglang:spec_num_draft_tokens"] = ("The number of draft tokens.", spec.num_draft_tokens)
    lines: list[str] = []
    for name, (help_text, value) in gauges.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {float(value)}"]
    counters = {
        "sglang:prompt_tokens_total": ("Number of prefill tokens processed.", e.stats.prompt_tokens_total),
        "sglang:generation_tokens_total": (
            "Number of generation tokens processed.",
            e.stats.generation_tokens_total,
        ),
        "sglang:num_requests_total": ("Number of requests processed.", e.stats.num_requests_total),
    }
    if newest and spec.enabled:
        counters["sglang:spec_verify_calls_total"] = ("Number of verify calls.", e.stats.spec_verify_calls)
    for name, (help_text, value) in counters.items():
        base = name.removesuffix("_total")
        lines += [
            f"# HELP {base} {help_text}",
            f"# TYPE {base} counter",
            f"{name}{{{labels}}} {float(value)}",
        ]
    lines += _histogram(
        "sglang:time_to_first_token_seconds",
        "Histogram of time to first token in seconds.",
        e.stats.ttft,
        labels,
    )
    lines += _histogram(
        "sglang:e2e_request_latency_seconds",
        "Histogram of End-to-end request latency in seconds",
        e.stats.e2e,
        labels,
    )
    return "\n".join(lines) + "\n"
