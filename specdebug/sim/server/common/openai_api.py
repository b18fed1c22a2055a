"""The sim's OpenAI-compatible surface (both engines): completions, chat, streaming, stop strings,
refusals in the server's own error shape, and vLLM's /tokenize and /detokenize.

Why refusals: the real servers honour `n > 1` and `logprobs` / `top_logprobs`; the sim cannot make
them mean anything, and ignoring them would hand a client one plain choice it did not ask for.  So
they are refused, 400, in the engine's own error body: SGLang's `{"object": "error", "message", "type":
"BadRequestError", "param", "code": 400}`, vLLM's `{"error": {"message", "type", "param", "code"}}`
(vllm serve/engine/protocol.py ErrorResponse).  `stop` strings are honoured like the servers do:
the text ends before the first match, finish_reason "stop", the matched string in SGLang's
`matched_stop` / vLLM's `stop_reason`; a piece that could still become a match is held back.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, Response, StreamingResponse

from specdebug.sim.server.common import faults
from specdebug.sim.server.common.engine import TOKEN_RE, VOCAB_WORDS, Engine, Finish, Request, count_tokens

BOS_ID = 128000
_VOCAB_LIMIT = 1 << 16


def sse(obj: Any) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def error(message: str, flavor: str, *, status: int = 400, param: str | None = None) -> JSONResponse:
    """The engine's own error body."""
    kind = {400: "BadRequestError", 404: "NotFoundError"}.get(status, "InternalServerError")
    info = {"message": message, "type": kind, "param": param, "code": status}
    body: dict[str, Any] = {"error": info} if flavor == "vllm" else {"object": "error", **info}
    return JSONResponse(body, status_code=status)


async def json_body(request: HttpRequest, flavor: str = "sglang") -> dict[str, Any] | Response:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return error("Invalid JSON body", flavor)
    if not isinstance(body, dict):
        return error("Body must be an object", flavor)
    return body


async def chunks(engine: Engine, req: Request) -> AsyncIterator[list[str] | Finish]:
    """Yield the token lists of each forward, then the Finish; aborts the request if the client leaves."""
    try:
        while True:
            item = await req.out.get()
            yield item
            if isinstance(item, Finish):
                return
    finally:
        if req.finished is None:
            engine.abort(req)


async def step_outputs(engine: Engine, req: Request) -> AsyncIterator[tuple[list[str], Finish | None]]:
    """vLLM's stream: one output per engine step (a speculative step's accepted + 1 tokens), merged
    with what queued up behind it when the API server fell behind the engine, the Finish riding on
    the last tokens (vllm/v1/engine/output_processor.py RequestOutputCollector.put; the completion
    stream yields one `data:` event per output, finish_reason on the one with the last tokens)."""
    try:
        while True:
            item = await req.out.get()
            tokens: list[str] = []
            finish = None
            while True:
                if isinstance(item, Finish):
                    finish = item
                    break
                tokens.extend(item)
                if req.out.empty():
                    break
                item = req.out.get_nowait()
            yield tokens, finish
            if finish is not None:
                return
    finally:
        if req.finished is None:
            engine.abort(req)


def stop_list(value: Any) -> list[str] | None:
    """`stop` as a list of non-empty strings; None when it is not a string or a list of them."""
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(s, str) for s in items):
        return None
    return [s for s in items if s]


class StopScanner:
    """Text in, text out up to the first stop string; holds back a tail that may still become one."""

    def __init__(self, stops: list[str]) -> None:
        self.stops = stops
        self.keep = max((len(s) for s in stops), default=1) - 1
        self.pending = ""
        self.matched: str | None = None

    def feed(self, text: str) -> str:
        if self.matched is not None:
            return ""
        self.pending += text
        hits = [(i, s) for s in self.stops if (i := self.pending.find(s)) >= 0]
        if hits:
            at, self.matched = min(hits)
            out, self.pending = self.pending[:at], ""
            return out
        cut = len(self.pending) - self.keep if self.keep else len(self.pending)
        out, self.pending = self.pending[: max(cut, 0)], self.pending[max(cut, 0) :]
        return out

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return out


async def texts(
    engine: Engine, req: Request, scanner: StopScanner, sent: list[int] | None = None
) -> AsyncIterator[str | Finish]:
    """The request's text pieces with stop strings applied, then its Finish; `sent[0]` counts the
    tokens handed out so far (what a chunk's running usage may claim: the engine runs ahead)."""
    async for item in chunks(engine, req):
        if isinstance(item, Finish):
            tail = scanner.flush()
            if tail:
                yield tail
            yield item
            return
        if sent is not None and not isinstance(item, Finish):
            sent[0] += len(item)
        piece = scanner.feed("".join(item))
        if piece:
            yield piece
        if scanner.matched is not None:
            engine.abort(req)
            yield Finish("stop", scanner.matched)  # the string, as the servers send
            return


async def whole_text(engine: Engine, req: Request, scanner: StopScanner) -> tuple[str, Finish | None]:
    """A non-streamed answer: all of the request's text (stop strings applied) and its Finish."""
    out, finish = "", None
    async for item in texts(engine, req, scanner):
        if isinstance(item, Finish):
            finish = item
        else:
            out += item
    return out, finish


def refused_param(body: dict[str, Any], *, chat: bool) -> tuple[str, str] | None:
    """(param, message) for a parameter the sim refuses rather than ignore."""
    n = body.get("n", 1)
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        return "n", f"n must be a positive integer, got {n!r}"
    if isinstance(n, int) and n > 1:
        return "n", "n > 1 is not supported by this (simulated) server: ask for one choice per request"
    logprobs = body.get("logprobs")
    if logprobs not in (None, False) or body.get("top_logprobs") not in (None, 0):
        return "logprobs", "logprobs / top_logprobs are not supported by this (simulated) server"
    if stop_list(body.get("stop")) is None:
        return "stop", "stop must be a string or a list of strings"
    return None


def refuse_native(sp: dict[str, Any], body: dict[str, Any]) -> Response | None:
    """SGLang's /generate: the same refusals (n, return_logprob), in SGLang's error shape."""
    if isinstance(sp.get("n"), int) and sp["n"] > 1:
        return error("n > 1 is not supported by this (simulated) server", "sglang", param="n")
    if body.get("return_logprob"):
        return error(
            "return_logprob is not supported by this (simulated) server", "sglang", param="return_logprob"
        )
    if stop_list(sp.get("stop")) is None:
        return error("stop must be a string or a list of strings", "sglang", param="stop")
    return None


async def openai_response(
    engine: Engine,
    model_id: str,
    request: HttpRequest,
    *,
    chat: bool,
    flavor: str = "sglang",
    request_faults: faults.RequestFaults | None = None,
) -> Response:
    """OpenAI completions / chat completions, streaming or not; `flavor` picks SGLang's `matched_stop`
    or vLLM's `stop_reason` in each choice (both put usage in a final chunk with include_usage)."""
    body = await json_body(request, flavor)
    if isinstance(body, Response):
        return body
    refused = refused_param(body, chat=chat)
    if refused is not None:
        return error(refused[1], flavor, param=refused[0])
    if request_faults is not None and request_faults.fraction and request_faults.next_fails():
        return JSONResponse(faults.failed_request_body(), status_code=500)
    if chat:
        messages = body.get("messages") or []
        prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        prompt_tokens = count_tokens(prompt) + 4 * len(messages)
        default_max = 4096
    else:
        prompt = body.get("prompt") or ""
        if isinstance(prompt, list):
            prompt_tokens = (
                len(prompt)
                if prompt and isinstance(prompt[0], int)
                else count_tokens(" ".join(map(str, prompt)))
            )
        else:
            prompt_tokens = count_tokens(str(prompt))
        default_max = 16
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens") or default_max
    req = engine.submit(prompt_tokens, int(max_tokens), ignore_eos=bool(body.get("ignore_eos")))
    scanner = StopScanner(stop_list(body.get("stop")) or [])
    rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
    created = int(time.time())
    model = body.get("model") or model_id
    obj = "chat.completion" if chat else "text_completion"

    def usage() -> dict[str, int]:
        return {
            "prompt_tokens": req.prompt_tokens,
            "completion_tokens": req.generated,
            "total_tokens": req.prompt_tokens + req.generated,
        }

    def choice(text: str, finish: Finish | None, *, first: bool = False) -> dict[str, Any]:
        reason = finish.reason if finish is not None and finish.reason != "abort" else None
        c: dict[str, Any] = {"index": 0}
        if chat:
            delta: dict[str, Any] = {"role": "assistant", "content": text} if first else {"content": text}
            c["delta"] = delta
        else:
            c["text"] = text
            c["logprobs"] = None
        c["finish_reason"] = reason
        if flavor == "vllm":
            c["stop_reason"] = finish.matched_stop if finish is not None else None
        else:
            c["matched_stop"] = finish.matched_stop if finish is not None else None
        return c

    if body.get("stream"):
        options = body.get("stream_options") or {}
        include_usage = bool(options.get("include_usage"))
        # SGLang and vLLM put running usage in every chunk with continuous_usage_stats
        continuous = include_usage and bool(options.get("continuous_usage_stats"))
        chunk_obj = "chat.completion.chunk" if chat else "text_completion"

        def chunk(choices: list[dict[str, Any]], with_usage: dict[str, int] | None = None) -> bytes:
            return sse(
                {"id": rid, "object": chunk_obj, "created": created, "model": model, "choices": choices,
                 "usage": with_usage}
            )  # fmt: skip

        def running() -> dict[str, int] | None:
            if not continuous:
                return None
            done = min(sent[0], req.generated)  # tokens sent so far, as the servers count
            return {"prompt_tokens": req.prompt_tokens, "completion_tokens": done,
                    "total_tokens": req.prompt_tokens + done}  # fmt: skip

        sent = [0]

        async def vllm_stream() -> AsyncIterator[bytes]:
            """One chunk per engine step, finish_reason on the last tokens' chunk (see step_outputs)."""
            first = True
            if chat:
                yield chunk([choice("", None, first=True)])
                first = False
            async for tokens, finish in step_outputs(engine, req):
                sent[0] += len(tokens)
                piece = scanner.feed("".join(tokens))
                if scanner.matched is not None:
                    engine.abort(req)
                    finish = Finish("stop", scanner.matched)
                elif finish is not None:
                    piece += scanner.flush()
                yield chunk([choice(piece, finish, first=first)], running())
                first = False
                if finish is not None:
                    break
            if include_usage:
                yield chunk([], usage())
            yield b"data: [DONE]\n\n"

        async def stream() -> AsyncIterator[bytes]:
            first = True
            if chat:
                yield chunk([choice("", None, first=True)])
                first = False
            async for item in texts(engine, req, scanner, sent):
                if isinstance(item, Finish):
                    yield chunk([choice("", item)])
                else:
                    yield chunk([choice(item, None, first=first)], running())
                    first = False
            if include_usage:
                yield chunk([], usage())
            yield b"data: [DONE]\n\n"

        body_iter = vllm_stream() if flavor == "vllm" else stream()
        return StreamingResponse(body_iter, media_type="text/event-stream")

    out, finish = await whole_text(engine, req, scanner)
    c = choice(out, finish)
    if chat:
        c.pop("delta")
        c["message"] = {"role": "assistant", "content": out}
    return JSONResponse({"id": rid, "object": obj, "created": created, "model": model, "choices": [c],
                         "usage": usage()})  # fmt: skip


class Vocab:
    """vLLM's /tokenize and /detokenize over the sim's rough tokenizer (engine.count_tokens): the same
    count, and ids that round-trip (the sim's own words first, others numbered as they come)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {w: 1000 + i for i, w in enumerate(VOCAB_WORDS)}
        self.words: dict[int, str] = {i: w for w, i in self.ids.items()}

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        out = [BOS_ID] if special else []
        for tok in TOKEN_RE.findall(text):
            if tok not in self.ids and len(self.ids) < _VOCAB_LIMIT:
                self.ids[tok] = 1000 + len(self.ids)
                self.words[self.ids[tok]] = tok
            out.append(self.ids.get(tok, 0))
        return out

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.words[i] for i in ids if i in self.words)

    async def tokenize(self, request: HttpRequest, max_model_len: int) -> Response:
        body = await json_body(request, "vllm")
        if isinstance(body, Response):
            return body
        special = body.get("add_special_tokens", True) is not False
        if isinstance(body.get("messages"), list):
            text = " ".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
        elif isinstance(body.get("prompt"), str):
            text = body["prompt"]
        else:
            return error("either prompt (a string) or messages is required", "vllm", param="prompt")
        tokens = self.encode(text, special=special)
        strs = (
            [self.words.get(t, "<s>" if t == BOS_ID else "") for t in tokens]
            if body.get("return_token_strs")
            else None
        )
        return JSONResponse(
            {"count": len(tokens), "max_model_len": max_model_len, "tokens": tokens, "token_strs": strs}
        )

    async def detokenize(self, request: HttpRequest) -> Response:
        body = await json_body(request, "vllm")
        if isinstance(body, Response):
            return body
        ids = body.get("tokens")
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return error("tokens must be a list of integers", "vllm", param="tokens")
        return JSONResponse({"prompt": self.decode(ids)})
