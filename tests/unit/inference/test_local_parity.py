"""The local backend's batched decoding step against the per-row loop it replaced (issue 21), on the CPU.

Two references: greedy outputs of the real SmolLM2 captured with the old code (local_golden.json), and the old loop
itself, kept below verbatim, run on the same loaded model and compared token for token — sampled rows, grammar rows
and stop strings included.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from genenv.domains import get_domain
from genenv.inference.base import Completion
from genenv.inference.local import LocalBackend, _Request
from tests.unit.inference import local_golden

GOLDEN = json.loads((Path(__file__).parent / "local_golden.json").read_text())
# A float32 logit differs between CPUs by ~1e-5 of its size; a step whose top-2 gap is below this is not compared.
MIN_MARGIN = 0.01


def _old_masked(backend: LocalBackend, matcher: Any, logits: torch.Tensor) -> torch.Tensor:
    import xgrammar as xgr

    bitmask = xgr.allocate_token_bitmask(1, backend._vocab_size)
    matcher.fill_next_token_bitmask(bitmask)
    row = logits.unsqueeze(0).clone()
    xgr.apply_token_bitmask_inplace(row, bitmask)
    return row[0]


def _old_generate_batch(backend: LocalBackend, requests: list[_Request]) -> list[Completion]:
    """LocalBackend._generate_batch as it was before issue 21 (commit 1dda5e5): per-row sampling, one host sync
    per row and value."""
    backend._ensure_loaded()
    tok = backend._tokenizer
    prompts = [tok(r.prompt, add_special_tokens=False).input_ids for r in requests]
    width = max(len(p) for p in prompts)
    pad = tok.pad_token_id if tok.pad_token_id is not None else next(iter(backend._eos_ids))
    input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    generators = [torch.Generator().manual_seed(r.seed) for r in requests]
    n = len(requests)
    out_ids: list[list[int]] = [[] for _ in range(n)]
    out_lps: list[list[float]] = [[] for _ in range(n)]
    finish: list[str | None] = [None] * n
    cut_texts: list[str | None] = [None] * n
    limit = max(r.max_tokens for r in requests)
    matchers = [None if r.json_schema is None else backend._matcher(r.json_schema) for r in requests]
    with torch.inference_mode(), backend._selected(requests[0].adapter) as model:
        out = model(input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True,
                    logits_to_keep=1)
        for _ in range(limit):
            logits = out.logits[:, -1, :].float()
            next_tokens = []
            for i, req in enumerate(requests):
                if finish[i] is not None:
                    next_tokens.append(pad)
                    continue
                row = logits[i] if matchers[i] is None else _old_masked(backend, matchers[i], logits[i])
                if req.temperature <= 0.0:
                    token = int(torch.argmax(row))
                    logprob = float(torch.log_softmax(row, dim=-1)[token])
                else:
                    scaled = row / req.temperature
                    token = int(torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=generators[i]))
                    logprob = float(torch.log_softmax(scaled, dim=-1)[token])
                out_ids[i].append(token)
                out_lps[i].append(logprob)
                next_tokens.append(token)
                finish[i], cut_texts[i] = backend._finished(req, out_ids[i])
                matcher = matchers[i]
                if matcher is not None and finish[i] is None:
                    matcher.accept_token(token)
                    if matcher.is_terminated():
                        finish[i] = "stop"
            if all(f is not None for f in finish):
                break
            attention = torch.cat([attention, torch.ones((n, 1), dtype=attention.dtype)], dim=1)
            positions = positions[:, -1:] + 1
            out = model(input_ids=torch.tensor(next_tokens).unsqueeze(1), attention_mask=attention,
                        position_ids=positions, past_key_values=out.past_key_values, use_cache=True)
    texts = [c if c is not None else str(tok.decode(ids, skip_special_tokens=True))
             for c, ids in zip(cut_texts, out_ids, strict=True)]
    return [Completion(text=texts[i], token_ids=out_ids[i], token_logprobs=out_lps[i], prompt_tokens=len(prompts[i]),
                       completion_tokens=len(out_ids[i]), finish_reason=finish[i] or "length", latency_s=0.0)
            for i in range(n)]


def _requests(backend: LocalBackend) -> list[_Request]:
    """A mixed batch: greedy, three temperatures, a stop string, two grammar rows (one greedy, one sampled)."""
    backend._ensure_loaded()
    schema = json.dumps(get_domain("arithmetic").task_json_schema(), sort_keys=True)

    def req(text: str, temperature: float, seed: int, *, stop: list[str] | None = None, json_schema: str | None = None,
            max_tokens: int = 24) -> _Request:
        prompt = backend._tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                                       add_generation_prompt=True, tokenize=False)
        return _Request(prompt=str(prompt), adapter=None, temperature=temperature, max_tokens=max_tokens,
                        stop=stop or [], seed=seed, submitted=time.perf_counter(), future=None,  # type: ignore[arg-type]
                        json_schema=json_schema)

    return [
        req("What is 12 + 18?", 0.0, 0),
        req("Say hi.", 0.7, 1),
        req("Write one sentence about rain.", 1.0, 2),
        req("List three colours.", 0.3, 3, stop=["\n"]),
        req("Write an arithmetic task as JSON.", 0.0, 4, json_schema=schema, max_tokens=30),
        req("Write an arithmetic task as JSON.", 1.0, 5, json_schema=schema, max_tokens=30),
        req("Count to five.", 0.7, 6, max_tokens=6),
    ]


def _same(new: list[Completion], old: list[Completion]) -> None:
    for a, b in zip(new, old, strict=True):
        assert a.token_ids == b.token_ids
        assert a.token_logprobs == b.token_logprobs  # the same float32 values, not just close ones
        assert (a.text, a.finish_reason, a.prompt_tokens) == (b.text, b.finish_reason, b.prompt_tokens)


def test_batched_step_equals_the_per_row_loop_on_a_tiny_model(tiny_model_dir: Path) -> None:
    backend = LocalBackend(tiny_model_dir, dtype="float32", device="cpu", num_threads=1)
    requests = _requests(backend)
    new, old = backend._generate_batch(requests), _old_generate_batch(backend, requests)
    assert len({tuple(c.token_ids) for c in new[1:4]}) == 3  # the sampled rows really sample different things
    assert {c.finish_reason for c in new} == {"stop", "length"}
    _same(new, old)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_batched_step_equals_the_per_row_loop_on_smollm2(model_dir: Path, dtype: str) -> None:
    """The real model, in both dtypes the CPU runs: the same tokens and log-probs, sampled rows included."""
    backend = LocalBackend(model_dir, dtype=dtype, device="cpu", num_threads=1)  # type: ignore[arg-type]
    requests = _requests(backend)
    new, old = backend._generate_batch(requests), _old_generate_batch(backend, requests)
    assert backend.device == "cpu" and backend.dtype == dtype
    assert new[4].text.startswith('{"expression": "')  # the grammar rows follow the schema
    assert new[5].text.startswith('{"expression": "')
    assert new[3].finish_reason == "stop" and "\n" not in new[3].text
    _same(new, old)


@pytest.mark.slow
async def test_greedy_outputs_equal_those_captured_before_the_rewrite(model_dir: Path) -> None:
    """Greedy SmolLM2 outputs through the public API equal those the old backend produced (local_golden.json)."""
    backend = LocalBackend(model_dir, dtype="float32", device="cpu", num_threads=1, seed=5, max_batch=8)
    try:
        now = await local_golden.run(backend)
    finally:
        await backend.aclose()
    greedy = [*zip(now["greedy_batch"], GOLDEN["greedy_batch"], GOLDEN["greedy_margins"], strict=True),
              (now["json_batch"][1], GOLDEN["json_batch"][1], GOLDEN["free_json_margins"]),
              (now["sampled_batch"][3], GOLDEN["sampled_batch"][3], GOLDEN["sampled_greedy_margins"])]
    compared = 0
    for row, gold, margin in greedy:
        # Compare up to the first near-tie of the capture (none below 0.03 in the committed file).
        upto = next((k for k, m in enumerate(margin) if m < MIN_MARGIN), len(margin))
        assert row["token_ids"][:upto] == gold["token_ids"][:upto]
        assert row["token_logprobs"][:upto] == pytest.approx(gold["token_logprobs"][:upto], abs=1e-4)
        compared += upto
    assert compared >= 100
    # The grammar row is greedy too: masked logits, no margin needed (the mask decides most steps).
    assert now["json_batch"][0]["token_ids"] == GOLDEN["json_batch"][0]["token_ids"]
