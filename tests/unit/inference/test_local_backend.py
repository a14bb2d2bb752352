"""The in-process backend on a tiny random Llama: logprobs, greedy/seeded determinism, batching, adapters."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from genenv.inference.base import InferenceError, SamplingParams
from genenv.inference.local import LocalBackend

MSG = [{"role": "user", "content": "What is 3 + 4? Reply with the number only."}]


def _backend(path: Path, **kw: object) -> LocalBackend:
    return LocalBackend(path, dtype="float32", num_threads=1, **kw)  # type: ignore[arg-type]


async def test_chat_returns_ids_logprobs_and_counts(tiny_model_dir: Path) -> None:
    backend = _backend(tiny_model_dir)
    try:
        c = await backend.chat(MSG, sampling=SamplingParams(max_tokens=12, logprobs=True))
    finally:
        await backend.aclose()
    assert c.completion_tokens == len(c.token_ids) == len(c.token_logprobs) > 0
    assert c.prompt_tokens == 45  # SmolLM2 chat template incl. its default system prompt (same as vLLM)
    assert all(lp <= 0.0 for lp in c.token_logprobs)
    assert c.finish_reason in {"stop", "length"}
    assert c.latency_s > 0


@pytest.mark.parametrize("temperature", [1.0, 0.7])
async def test_logprobs_match_a_direct_forward_pass(tiny_model_dir: Path, temperature: float) -> None:
    """The returned logprob of each sampled token is that of the distribution it was sampled from:
    log_softmax(logits / T) of the model at that position."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    backend = _backend(tiny_model_dir, seed=3)
    try:
        c = await backend.complete("The answer is",
                                   sampling=SamplingParams(temperature=temperature, max_tokens=10, logprobs=True))
    finally:
        await backend.aclose()
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)).eval()
    prompt = tok("The answer is", add_special_tokens=False).input_ids
    ids = torch.tensor([prompt + c.token_ids])
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].float() / temperature, dim=-1)
    expected = [float(logp[len(prompt) - 1 + i, t]) for i, t in enumerate(c.token_ids)]
    assert c.token_logprobs == pytest.approx(expected, abs=1e-4)


async def test_greedy_is_deterministic_and_seeded_sampling_reproducible(tiny_model_dir: Path) -> None:
    a, b, other = _backend(tiny_model_dir, seed=7), _backend(tiny_model_dir, seed=7), _backend(tiny_model_dir, seed=8)
    try:
        g1 = await a.chat(MSG, sampling=SamplingParams(temperature=0.0, max_tokens=16))
        g2 = await other.chat(MSG, sampling=SamplingParams(temperature=0.0, max_tokens=16))
        s_a = [await a.chat(MSG, sampling=SamplingParams(temperature=1.0, max_tokens=16)) for _ in range(3)]
        s_b = [await b.chat(MSG, sampling=SamplingParams(temperature=0.0, max_tokens=16))] + [
            await b.chat(MSG, sampling=SamplingParams(temperature=1.0, max_tokens=16)) for _ in range(3)
        ]
        s_o = [await other.chat(MSG, sampling=SamplingParams(temperature=1.0, max_tokens=16)) for _ in range(3)]
    finally:
        for x in (a, b, other):
            await x.aclose()
    assert g1.token_ids == g2.token_ids  # greedy ignores the seed
    assert [c.token_ids for c in s_a] == [c.token_ids for c in s_b[1:]]  # same seed, same request order
    assert [c.token_ids for c in s_a] != [c.token_ids for c in s_o]
    assert len({tuple(c.token_ids) for c in s_a}) > 1  # sampling actually samples


async def test_concurrent_requests_batch_without_changing_results(tiny_model_dir: Path) -> None:
    """A request samples the same tokens alone or inside a batch of different prompts (own generator each)."""
    prompts = [[{"role": "user", "content": f"What is {i} + {i}?"}] for i in range(6)]
    alone, batched = _backend(tiny_model_dir, seed=11), _backend(tiny_model_dir, seed=11, max_batch=8)
    try:
        one_by_one = [await alone.chat(p, sampling=SamplingParams(temperature=0.8, max_tokens=8)) for p in prompts]
        together = await asyncio.gather(
            *(batched.chat(p, sampling=SamplingParams(temperature=0.8, max_tokens=8)) for p in prompts)
        )
    finally:
        await alone.aclose()
        await batched.aclose()
    assert [c.token_ids for c in together] == [c.token_ids for c in one_by_one]


async def test_stop_strings_and_max_tokens(tiny_model_dir: Path) -> None:
    backend = _backend(tiny_model_dir)
    try:
        free = await backend.complete("1 2 3", sampling=SamplingParams(max_tokens=6))
        assert free.finish_reason == "length" and free.completion_tokens == 6
        stop_at = free.text[2:4]
        cut = await backend.complete("1 2 3", sampling=SamplingParams(max_tokens=6, stop=[stop_at]))
    finally:
        await backend.aclose()
    assert cut.finish_reason == "stop"
    assert stop_at not in cut.text and free.text.startswith(cut.text)


def test_survives_a_new_event_loop_per_job(tiny_model_dir: Path) -> None:
    """Celery runs each job in its own asyncio.run; the loaded model is reused across loops."""
    backend = _backend(tiny_model_dir)
    first = asyncio.run(backend.chat(MSG, sampling=SamplingParams(max_tokens=4)))
    second = asyncio.run(backend.chat(MSG, sampling=SamplingParams(max_tokens=4)))
    asyncio.run(backend.aclose())
    assert first.token_ids == second.token_ids


async def test_adapter_changes_output_and_base_stays_intact(tiny_model_dir: Path, tiny_lora_dir: Path) -> None:
    backend = _backend(tiny_model_dir)
    try:
        base_before = await backend.chat(MSG, sampling=SamplingParams(max_tokens=12))
        with pytest.raises(InferenceError, match="unknown adapter"):
            await backend.chat(MSG, sampling=SamplingParams(max_tokens=4), adapter="nope")
        await backend.load_adapter("a1", str(tiny_lora_dir))
        assert await backend.list_adapters() == {"a1"}
        tuned = await backend.chat(MSG, sampling=SamplingParams(max_tokens=12), adapter="a1")
        base_after = await backend.chat(MSG, sampling=SamplingParams(max_tokens=12))
        await backend.unload_adapter("a1")
        with pytest.raises(InferenceError, match="unknown adapter"):
            await backend.chat(MSG, sampling=SamplingParams(max_tokens=4), adapter="a1")
        with pytest.raises(InferenceError, match="cannot load adapter"):
            await backend.load_adapter("bad", str(tiny_model_dir / "missing"))
        assert await backend.list_adapters() == set()
    finally:
        await backend.aclose()
    assert tuned.token_ids != base_before.token_ids
    assert base_after.token_ids == base_before.token_ids


async def test_adapters_from_a_registry_load_on_first_use(tiny_model_dir: Path, tiny_lora_dir: Path) -> None:
    backend = _backend(tiny_model_dir, adapters={"reg": tiny_lora_dir})
    try:
        mixed = await asyncio.gather(backend.chat(MSG, sampling=SamplingParams(max_tokens=8), adapter="reg"),
                                     backend.chat(MSG, sampling=SamplingParams(max_tokens=8)))
        again = await backend.chat(MSG, sampling=SamplingParams(max_tokens=8), adapter="reg")
    finally:
        await backend.aclose()
    assert mixed[0].token_ids == again.token_ids
    assert mixed[0].token_ids != mixed[1].token_ids


async def test_json_schema_guided_decoding_in_process(tiny_model_dir: Path) -> None:
    """Even a random model writes schema-valid JSON when decoding is constrained by the grammar."""
    import json
    import re

    from genenv.domains import get_domain

    domain = get_domain("arithmetic")
    schema = domain.task_json_schema()
    pattern = re.compile(schema["properties"]["expression"]["pattern"])
    backend = _backend(tiny_model_dir, seed=2)
    try:
        outs = await asyncio.gather(
            *(backend.chat(MSG, sampling=SamplingParams(temperature=t, max_tokens=200, json_schema=schema))
              for t in (0.0, 1.0, 1.0, 1.0))
        )
        free = await backend.chat(MSG, sampling=SamplingParams(temperature=0.0, max_tokens=20))
    finally:
        await backend.aclose()
    for out in outs:
        assert out.finish_reason == "stop", out
        obj = json.loads(out.text)
        assert set(obj) == {"expression"} and pattern.match(obj["expression"])
    with pytest.raises(ValueError):
        json.loads(free.text)  # unconstrained, the random model writes no JSON


async def test_the_function_calling_schema_guides_the_local_backend(tiny_model_dir: Path) -> None:
    """xgrammar compiles the function-calling task schema (it once refused it, and quickstart turned guidance off
    for such domains on the local backend): a random model's reply starts as the schema says."""
    from genenv.domains import get_domain

    backend = _backend(tiny_model_dir, seed=2)
    try:
        out = await backend.chat(MSG, sampling=SamplingParams(
            temperature=1.0, max_tokens=24, json_schema=get_domain("function_calling").task_json_schema()))
    finally:
        await backend.aclose()
    import re

    assert re.match(r'\{"(question|functions|ground_truth)": [\["]', out.text), out.text  # any property order
