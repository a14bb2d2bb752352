"""Greedy outputs of the local backend on the real SmolLM2-135M-Instruct, captured before issue 21 rewrote its
decoding loop (per-row sampling and host syncs → one batched step per token), so the rewrite is checked against
what the backend produced before it, not against itself.

    PYTHONPATH=shared:services python -m tests.unit.inference.local_golden MODEL_DIR \
        > tests/unit/inference/local_golden.json

Captured in float32 with one torch thread. Each greedy step's margin (top-1 minus top-2 logit, from a separate
unbatched forward pass) is stored too: the test only compares steps whose margin is far above float32 noise, so
another CPU's summation order cannot flip a token and fail the test for no reason.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from genenv.domains import get_domain
from genenv.inference.base import SamplingParams

GREEDY_BATCH = [
    "What is 12 + 18? Reply with the number only.",
    "Say hi.",
    "Write one sentence about rain.",
    "List three colours.",
]
JSON_PROMPT = "Write a new arithmetic task as JSON."
SAMPLED_PROMPT = "What is 7 * 6?"


def _msg(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


async def run(backend: Any) -> dict[str, Any]:
    """The three batches: 4 greedy prompts; greedy JSON-schema + greedy free text; 3 sampled (T = 0.7) + 1 greedy."""
    schema = get_domain("arithmetic").task_json_schema()
    a = await asyncio.gather(
        *(backend.chat(_msg(p), sampling=SamplingParams(temperature=0.0, max_tokens=20)) for p in GREEDY_BATCH)
    )
    b = await asyncio.gather(
        backend.chat(_msg(JSON_PROMPT), sampling=SamplingParams(temperature=0.0, max_tokens=40, json_schema=schema)),
        backend.chat(_msg(JSON_PROMPT), sampling=SamplingParams(temperature=0.0, max_tokens=40)),
    )
    c = await asyncio.gather(
        *(backend.chat(_msg(SAMPLED_PROMPT), sampling=SamplingParams(temperature=0.7, max_tokens=16))
          for _ in range(3)),
        backend.chat(_msg(SAMPLED_PROMPT), sampling=SamplingParams(temperature=0.0, max_tokens=16)),
    )

    def rows(out: list[Any]) -> list[dict[str, Any]]:
        return [{"token_ids": o.token_ids, "token_logprobs": o.token_logprobs, "finish_reason": o.finish_reason,
                 "text": o.text} for o in out]

    return {"greedy_batch": rows(a), "json_batch": rows(b), "sampled_batch": rows(c)}


def margins(model_dir: Path, prompt: str, token_ids: list[int]) -> list[float]:
    """Top-1 minus top-2 logit at each generated position (float32, unbatched, no cache)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    text = tok.apply_chat_template(_msg(prompt), add_generation_prompt=True, tokenize=False)
    ids = tok(text, add_special_tokens=False).input_ids
    with torch.no_grad():
        logits = model(torch.tensor([ids + token_ids])).logits[0].float()
    top2 = logits[len(ids) - 1 : len(ids) - 1 + len(token_ids)].topk(2, dim=-1).values
    return [float(x) for x in (top2[:, 0] - top2[:, 1])]


def main() -> None:
    """Capture with the backend currently on the path and print the JSON."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from genenv.inference.local import LocalBackend

    model_dir = Path(sys.argv[1])
    backend = LocalBackend(model_dir, dtype="float32", num_threads=1, seed=5, max_batch=8)

    async def go() -> dict[str, Any]:
        try:
            return await run(backend)
        finally:
            await backend.aclose()

    out = asyncio.run(go())
    out["greedy_margins"] = [margins(model_dir, p, r["token_ids"]) for p, r in zip(GREEDY_BATCH, out["greedy_batch"],
                                                                                    strict=True)]
    out["free_json_margins"] = margins(model_dir, JSON_PROMPT, out["json_batch"][1]["token_ids"])
    out["sampled_greedy_margins"] = margins(model_dir, SAMPLED_PROMPT, out["sampled_batch"][3]["token_ids"])
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
