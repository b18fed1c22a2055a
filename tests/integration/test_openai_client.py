"""The real `openai` Python client against the sim in both engine modes (issue 21 sections 4-5).

models, completions, chat, streaming with usage; `stop` honoured; `n > 1` and logprobs refused with the
engine's own 400 body (the client raises BadRequestError); vLLM's /tokenize and /detokenize.  Each
sim runs as a local process on loopback (EAGLE-3 2 steps) and is stopped by its own group.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from specdebug.sim.box.local import LocalSim, start_local_sim

SPEC = '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B", "num_speculative_tokens": 2}'
ENGINES = {
    "sglang": ["--tp", "1", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2"],
    "vllm": [
        "--engine",
        "vllm",
        "serve",
        "meta-llama/Llama-3.1-70B-Instruct",
        "-tp",
        "2",
        "--speculative-config",
        SPEC,
    ],
}


@pytest.fixture(scope="module", params=list(ENGINES))
def sim(request, tmp_path_factory) -> LocalSim:
    box = start_local_sim(
        ENGINES[request.param], log_file=tmp_path_factory.mktemp("oai") / "sim.log", time_scale=0.01
    )
    box.engine = request.param  # type: ignore[attr-defined]
    try:
        box.wait_ready(60)
        yield box
    finally:
        box.stop()


def client(sim: LocalSim) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{sim.url}/v1", api_key="none", max_retries=0, timeout=30)


def test_models_completions_chat_and_streaming_usage(sim: LocalSim) -> None:
    c = client(sim)
    (card,) = c.models.list().data
    assert card.owned_by == sim.engine  # type: ignore[attr-defined]
    done = c.completions.create(model=card.id, prompt="The capital of France is", max_tokens=6,
                                extra_body={"ignore_eos": True})  # fmt: skip
    assert done.choices[0].finish_reason == "length" and done.usage.completion_tokens == 6
    chat = c.chat.completions.create(model=card.id, messages=[{"role": "user", "content": "hi"}], max_tokens=4,
                                     extra_body={"ignore_eos": True})  # fmt: skip
    assert chat.choices[0].message.role == "assistant" and chat.usage.completion_tokens == 4
    stream = c.chat.completions.create(model=card.id, messages=[{"role": "user", "content": "hi"}], max_tokens=12,
                                       stream=True, stream_options={"include_usage": True},
                                       extra_body={"ignore_eos": True})  # fmt: skip
    parts = list(stream)
    assert parts[-1].usage is not None and parts[-1].usage.completion_tokens == 12 and parts[-1].choices == []
    text = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
    assert len(text.split()) == 12
    assert [p.choices[0].finish_reason for p in parts if p.choices][-1] == "length"
    legacy = c.completions.create(model=card.id, prompt="x", max_tokens=5, stream=True,
                                  stream_options={"include_usage": True}, extra_body={"ignore_eos": True})  # fmt: skip
    assert list(legacy)[-1].usage.completion_tokens == 5


def test_stop_strings_are_honoured(sim: LocalSim) -> None:
    c = client(sim)
    model = c.models.list().data[0].id
    for stream in (False, True):
        seen_stop = False
        for _ in range(6):  # the sim's words are random; " the" is its commonest
            if stream:
                parts = list(c.completions.create(model=model, prompt="x", max_tokens=60, stop=[" the", " of"],
                                                  stream=True, extra_body={"ignore_eos": True}))  # fmt: skip
                text = "".join(p.choices[0].text for p in parts if p.choices)
                reason = [p.choices[0].finish_reason for p in parts if p.choices][-1]
            else:
                out = c.completions.create(model=model, prompt="x", max_tokens=60, stop=[" the", " of"],
                                           extra_body={"ignore_eos": True})  # fmt: skip
                text, reason = out.choices[0].text, out.choices[0].finish_reason
            assert " the " not in f"{text} " and " of " not in f"{text} ", text
            if reason == "stop":
                seen_stop = True
                break
        assert seen_stop


@pytest.mark.parametrize(
    "extra",
    [{"n": 2}, {"logprobs": 2}, {"top_logprobs": 3, "logprobs": True}],
    ids=["n", "logprobs", "top_logprobs"],
)
def test_unsupported_parameters_are_refused_in_the_server_error_shape(sim: LocalSim, extra: dict) -> None:
    c = client(sim)
    model = c.models.list().data[0].id
    with pytest.raises(openai.BadRequestError) as exc:
        if "top_logprobs" in extra:
            c.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=3,
                                      **extra)  # fmt: skip
        else:
            c.completions.create(model=model, prompt="x", max_tokens=3, **extra)
    body = exc.value.body
    err = body if sim.engine == "sglang" else body  # type: ignore[attr-defined]
    assert exc.value.status_code == 400
    if sim.engine == "vllm":  # type: ignore[attr-defined]
        # the client unwraps vLLM's {"error": {...}}; SGLang's body is flat with "object": "error"
        assert err["type"] == "BadRequestError" and err["code"] == 400
    else:
        assert err["object"] == "error" and err["type"] == "BadRequestError" and err["code"] == 400
    assert "not supported" in exc.value.message


def test_vllm_tokenize_and_detokenize(sim: LocalSim) -> None:
    if sim.engine != "vllm":  # type: ignore[attr-defined]
        r = httpx.post(f"{sim.url}/tokenize", json={"prompt": "x"})
        assert r.status_code == 404  # SGLang serves no /tokenize at this path
        return
    tok = httpx.post(f"{sim.url}/tokenize", json={"prompt": "The capital city of France is"}).json()
    assert tok["count"] == 7 and len(tok["tokens"]) == 7 and tok["max_model_len"] > 0
    back = httpx.post(f"{sim.url}/detokenize", json={"tokens": tok["tokens"][1:]}).json()
    assert back["prompt"] == "The capital city of France is"
    bad = httpx.post(f"{sim.url}/detokenize", json={"tokens": ["a"]})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "BadRequestError"


def test_log_has_no_error_after_the_client(sim: LocalSim, tmp_path: Path) -> None:
    assert "Traceback" not in sim.log_text()
