"""Learning on the real SmolLM2-135M on CPU (a few steps, small batches, ≤ 2 torch threads).

GRPO raises positively-advantaged completions and lowers negatively-advantaged ones (with the logprobs vLLM
recorded at rollout time); RWR raises high-weight generations more than low-weight ones; a tiny KL cap stops
early; an adapter the trainer writes hot-loads into vLLM and changes its greedy output. Measured numbers are
printed (run with -s to see them).
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from genenv.contracts.adapters import Role
from genenv.contracts.runs import CurriculumConfig, RunConfig
from genenv.curriculum import score_batches
from genenv.settings import TrainerSettings
from genenv_trainer.records import Attempt, Generation, RolloutGroup
from genenv_trainer.training import runner
from genenv_trainer.training.data import chat_prompt_ids, collate, make_example, text_completion_ids
from genenv_trainer.training.lora import load_tokenizer, save_adapter
from genenv_trainer.training.ops import masked_mean_per_row, reference_logprobs, token_logprobs

pytestmark = pytest.mark.slow

# One thread: on a shared 2-core machine two OpenMP threads spin-wait on each other and run 4× slower.
TRAINER = TrainerSettings(torch_threads=1, dtype="auto")  # bf16 where the CPU has it natively, else fp32
SIM_PROMPT = [{"role": "user", "content": "Write one new arithmetic task as JSON with keys question and answer."}]
# Per-token standard deviation of the importance ratio exp(trainer log p − vLLM's recorded log p) before any update,
# both sides in bf16 on the AVX-512/AMX CPU: measured 0.073 and 0.078 over 1446 and 2500 sampled tokens (T = 0.7).
# It is bf16 rounding in the two forward passes, unbiased (the ratio's mean over those tokens: 1.003 and 0.9996),
# half of it vLLM's: against an fp32 forward pass vLLM's log-probs are off by 0.058-0.065 rms, the trainer's by
# 0.054-0.056 (it already takes the log-softmax in fp32). An fp32 trainer would not remove it: the ratio's std vs
# vLLM is 0.071 with an fp32 LM head and 0.064 with the whole model in fp32.
RATIO_TOKEN_STD = 0.078


def _measured(name: str, **values: Any) -> None:
    print(f"\nMEASURED {name}: {json.dumps(values, default=str)}")


def _rollouts(vllm_url: str, messages: list[dict[str, str]], n: int) -> list[dict[str, Any]]:
    """n sampled answers with the token ids and logprobs vLLM records, as the rollout worker stores them."""
    r = httpx.post(f"{vllm_url}/v1/chat/completions", timeout=300, json={
        "model": "base", "messages": messages, "max_tokens": 24, "temperature": 0.7, "n": n,
        "logprobs": True, "return_token_ids": True})
    r.raise_for_status()
    return [{"text": c["message"]["content"], "token_ids": c["token_ids"],
             "logprobs": [x["logprob"] for x in c["logprobs"]["content"]]} for c in r.json()["choices"]]


def _last_int(text: str) -> int | None:
    found = re.findall(r"-?\d+", text)
    return int(found[-1]) if found else None


def _mean_logprobs(
    model: Any, tokenizer: Any, pairs: list[tuple[list[dict[str, str]], str]], ids: list[list[int]] | None = None
) -> tuple[list[float], list[float]]:
    """Per (prompt, completion), the mean token log-prob under the base model (adapter off) and the trained policy.
    ``ids`` gives the completions' sampled token ids (else the text is tokenised)."""
    examples = [make_example(chat_prompt_ids(tokenizer, m), (ids[i] if ids else text_completion_ids(tokenizer, t)),
                             512) for i, (m, t) in enumerate(pairs)]
    b = collate(examples, pad_id=tokenizer.pad_token_id)
    model.eval()
    with torch.no_grad():
        before = masked_mean_per_row(reference_logprobs(model, b), b.completion_mask)
        after = masked_mean_per_row(token_logprobs(model, b), b.completion_mask)
    return before.tolist(), after.tolist()


@pytest.mark.vllm
def test_grpo_raises_good_and_lowers_bad_completions(model_dir: Path, vllm_url: str) -> None:
    """Real rollouts: 8 sampled answers per question from vLLM (T = 0.7) with their recorded logprobs."""
    groups: list[RolloutGroup] = []
    pairs, signs = [], []
    questions = [("What is 7 + 5? Reply with the number only.", 12), ("What is 6 * 7? Reply with the number only.", 42),
                 ("What is 8 + 9? Reply with the number only.", 17), ("What is 9 - 4? Reply with the number only.", 5)]
    for task_id, (q, answer) in enumerate(questions * 3):  # up to three rounds until two groups carry signal
        if len(groups) == 2:
            break
        messages = [{"role": "user", "content": q}]
        outs = _rollouts(vllm_url, messages, 8)
        rewards = [1.0 if _last_int(o["text"]) == answer else 0.0 for o in outs]
        if len(set(rewards)) < 2:
            continue
        groups.append(RolloutGroup(task_id, 0, [
            Attempt(i, messages, o["text"], r, token_ids=o["token_ids"], token_logprobs=o["logprobs"])
            for i, (o, r) in enumerate(zip(outs, rewards, strict=True))]))
        pairs += [(messages, o["text"]) for o in outs]
        signs += [r > 0 for r in rewards]
    assert len(groups) == 2, "vLLM produced no group with both right and wrong answers"
    # One pass over the 16 attempts in two steps of 8.
    config = RunConfig.model_validate({"agent": {"learning_rate": 5e-4, "batch_size": 8, "micro_batch_size": 4,
                                                 "max_steps_per_epoch": 2}})
    result = runner.train_agent(model_path=model_dir, parent=None, config=config, fresh=groups, replay=[],
                                trainer=TRAINER, seed=0)
    assert result.model is not None
    m = result.metrics
    tokenizer = load_tokenizer(model_dir)
    before, after = _mean_logprobs(result.model, tokenizer, pairs, [a.token_ids or [] for g in groups
                                                                     for a in g.attempts])
    delta = [a - b for a, b in zip(after, before, strict=True)]
    pos = [d for d, s in zip(delta, signs, strict=True) if s]
    neg = [d for d, s in zip(delta, signs, strict=True) if not s]
    step0 = m["per_step"][0]
    # The first step's mean ratio averages ~110 tokens: its standard error is RATIO_TOKEN_STD / √tokens (≈ 0.007),
    # so the 1e-2 bound used before failed one batch in six (measured 0.9915, 0.9861, 0.9876 and once 1.0114).
    # Five standard errors: resampling step-0 batches of 8 from the 160 measured sequences exceeded it 3 times in
    # 10⁵ (the bf16 ratio has heavy tails), while the T = 1 log-probs the trainer once used exceed it 65% of the time.
    ratio_bound = 5 * RATIO_TOKEN_STD / math.sqrt(step0["tokens"])
    _measured("grpo", n_pos=len(pos), n_neg=len(neg), mean_pos_delta=round(sum(pos) / len(pos), 4),
              mean_neg_delta=round(sum(neg) / len(neg), 4),
              step0_mean_ratio_vs_vllm=round(step0["mean_ratio"], 4), step0_tokens=int(step0["tokens"]),
              step0_ratio_bound=round(ratio_bound, 4), step0_clip_fraction=step0["clip_fraction"],
              seconds_per_step=round(m["seconds_per_step"], 2), peak_rss_mb=m["peak_rss_mb"], kl=m["kl"])
    assert m["ratio_fallback"] == 0 and m["steps"] == 2 and m["sequences"] == 16
    # vLLM's logprobs (processed: at the sampling temperature 0.7) and the trainer's (logits / 0.7) agree: the
    # first step's importance ratio is 1 within the bf16 noise of the two forward passes (per token the agreement is
    # checked by test_recorded_logprobs_are_those_of_the_sampled_distribution).
    assert abs(step0["mean_ratio"] - 1.0) < ratio_bound
    assert sum(pos) / len(pos) > 0 > sum(neg) / len(neg)


@pytest.mark.vllm
def test_recorded_logprobs_are_those_of_the_sampled_distribution(model_dir: Path, vllm_url: str) -> None:
    """vLLM samples at T = 0.7 and records the processed log-probs; the trainer's log-probs at T = 0.7 (the policy
    before any update) equal them token by token, while the T = 1 ones the trainer used before do not."""
    from genenv_trainer.training.lora import load_policy

    messages = [{"role": "user", "content": "What is 7 + 5? Reply with the number only."}]
    outs = _rollouts(vllm_url, messages, 8)
    tokenizer = load_tokenizer(model_dir)
    prompt = chat_prompt_ids(tokenizer, messages)
    b = collate([make_example(prompt, o["token_ids"], 512) for o in outs], pad_id=tokenizer.pad_token_id,
                values=[o["logprobs"] for o in outs])
    policy = load_policy(model_dir, RunConfig().lora, None, device=torch.device("cpu"), dtype=TRAINER.dtype)
    mask = b.completion_mask.bool()
    assert b.values is not None
    recorded = b.values[mask]
    with torch.no_grad():
        at_t = token_logprobs(policy, b, temperature=0.7)[mask]
        at_1 = token_logprobs(policy, b, temperature=1.0)[mask]
    ratio_t = torch.exp(at_t - recorded)
    ratio_1 = torch.exp(at_1 - recorded)
    _measured("sampling_logprobs", tokens=int(mask.sum()), mean_ratio_T07=round(float(ratio_t.mean()), 5),
              mean_abs_logratio_T07=round(float((at_t - recorded).abs().mean()), 5),
              mean_ratio_T1=round(float(ratio_1.mean()), 5),
              mean_abs_logratio_T1=round(float((at_1 - recorded).abs().mean()), 5))
    # The mean over ~110 tokens has standard error RATIO_TOKEN_STD / √tokens ≈ 0.007: 1e-2 was 1.3 of them and
    # failed a run in the fresh-clone suite (0.0132); 5 standard errors, as for the first GRPO step above.
    assert abs(float(ratio_t.mean()) - 1.0) < 5 * RATIO_TOKEN_STD / math.sqrt(int(mask.sum()))
    # Per token the two bf16 implementations differ by a few hundredths (measured 0.04 mean |Δ log p| at T = 0.7);
    # the T = 1 log-probs the trainer used before are off by several times that (measured 0.26).
    assert float((at_t - recorded).abs().mean()) < 0.1
    assert float((at_1 - recorded).abs().mean()) > 4 * float((at_t - recorded).abs().mean())


def _rwr_config(**simulator: Any) -> RunConfig:
    return RunConfig.model_validate({"simulator": {"learning_rate": 5e-4, "batch_size": 4, "micro_batch_size": 4,
                                                   "max_steps_per_epoch": 2, "kl_coef": 0.05, **simulator}})


def test_rwr_raises_high_weight_generations_more(model_dir: Path) -> None:
    """The same generations trained twice with the weights swapped: each gains more when its weight is high."""
    # Two in-band seed batches: p̂ = 0.5 (R_env = 1) and p̂ = 0.4 (R_env = e^−0.2); λ = 10 makes weights differ ×6.
    scored = score_batches([("a", 4, 8), ("b", 4, 10)], CurriculumConfig(beta=20.0, rwr_lambda=10.0)).scores
    high, low = scored[0].weight, scored[1].weight
    assert high is not None and low is not None and high > low
    texts = {"a": ['{"question": "What is 3 + 4?", "answer": 7}', '{"question": "What is 8 - 5?", "answer": 3}'],
             "b": ['{"question": "What is 6 + 2?", "answer": 8}', '{"question": "What is 9 - 4?", "answer": 5}']}
    tokenizer = load_tokenizer(model_dir)

    def gains(weights: dict[str, float]) -> tuple[dict[str, float], dict[str, Any]]:
        gens = [Generation(i, seed, SIM_PROMPT, t, weights[seed])
                for i, (seed, t) in enumerate((s, t) for s in ("a", "b") for t in texts[s])]
        # One pass over the four generations in one batch (weights are normalised within a batch).
        result = runner.train_simulator(model_path=model_dir, parent=None, config=_rwr_config(learning_rate=1e-3),
                                        generations=gens, trainer=TRAINER, seed=0)
        assert result.model is not None
        before, after = _mean_logprobs(result.model, tokenizer, [(g.prompt_messages, g.raw_text) for g in gens])
        g = [x - y for x, y in zip(after, before, strict=True)]
        return {"a": (g[0] + g[1]) / 2, "b": (g[2] + g[3]) / 2}, result.metrics

    a_high, m = gains({"a": high, "b": low})
    b_high, _ = gains({"a": low, "b": high})
    _measured("rwr", weights=[round(high, 3), round(low, 3)], gain_a_when_high=round(a_high["a"], 4),
              gain_a_when_low=round(b_high["a"], 4), gain_b_when_high=round(b_high["b"], 4),
              gain_b_when_low=round(a_high["b"], 4), kl=m["kl"], seconds_per_step=round(m["seconds_per_step"], 2),
              peak_rss_mb=m["peak_rss_mb"])
    assert m["steps"] == 1 and not m["early_stopped"]
    assert a_high["a"] > b_high["a"] > 0 and b_high["b"] > a_high["b"] > 0


def test_a_tiny_kl_cap_stops_early(model_dir: Path) -> None:
    gens = [Generation(0, "s", SIM_PROMPT, '{"question": "What is 3 + 4?", "answer": 7}', 1.0),
            Generation(1, "s", SIM_PROMPT, '{"question": "What is 2 + 2?", "answer": 4}', 1.0)]
    result = runner.train_simulator(model_path=model_dir, parent=None,
                                    config=_rwr_config(batch_size=1, micro_batch_size=1, max_steps_per_epoch=3,
                                                       kl_cap=1e-6), generations=gens,
                                    trainer=TRAINER, seed=0)
    m = result.metrics
    _measured("kl_cap", steps=m["steps"], planned=m["planned_steps"], kl_at_stop=m["kl_at_stop"])
    assert m["early_stopped"] and m["steps"] == 1 and m["stopped_at_step"] == 1 and m["kl_at_stop"] > 1e-6
    assert result.model is not None  # the step taken before the stop is kept


@pytest.mark.vllm
def test_written_adapter_is_served_by_vllm_and_changes_its_output(
    model_dir: Path, vllm_url: str, tmp_path: Path
) -> None:
    question = [{"role": "user", "content": "Name a fruit."}]
    target = "Kiwi kiwi kiwi kiwi kiwi."
    gens = [Generation(i, "s", question, target, 1.0) for i in range(8)]  # one pass: 4 steps of 2
    result = runner.train_simulator(
        model_path=model_dir, parent=None,
        config=_rwr_config(learning_rate=1e-3, batch_size=2, micro_batch_size=2, max_steps_per_epoch=4, kl_coef=0.0,
                           kl_cap=1e3),
        generations=gens, trainer=TRAINER, seed=0,
    )
    assert result.model is not None and result.metrics["steps"] == 4
    path = save_adapter(result.model, tmp_path, "vllmtest", Role.SIMULATOR, 1)
    written = time.perf_counter()
    name = f"trainer-test-{uuid.uuid4().hex[:8]}"

    def chat(model: str) -> str:
        r = httpx.post(f"{vllm_url}/v1/chat/completions", timeout=120, json={
            "model": model, "messages": question, "max_tokens": 16, "temperature": 0})
        r.raise_for_status()
        return str(r.json()["choices"][0]["message"]["content"])

    r = httpx.post(f"{vllm_url}/v1/load_lora_adapter", timeout=120, json={"lora_name": name, "lora_path": str(path)})
    loaded = time.perf_counter()
    try:
        assert r.status_code == 200, r.text
        adapted = chat(name)
        served = time.perf_counter()
        base = chat("base")
        _measured("vllm_adapter", load_s=round(loaded - written, 3), first_answer_s=round(served - written, 3),
                  base=base, adapted=adapted)
        assert adapted != base
        assert "kiwi" in adapted.lower()
    finally:
        httpx.post(f"{vllm_url}/v1/unload_lora_adapter", timeout=60, json={"lora_name": name})
