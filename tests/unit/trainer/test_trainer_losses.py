"""GRPO and RWR loss math on a tiny random Llama (real tokenizer): ratios, clipping, KL, weights, the KL cap."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
import torch

from genenv.contracts.runs import AgentTrainConfig, SimulatorTrainConfig
from genenv_trainer.records import Attempt, Generation, RolloutGroup
from genenv_trainer.training import grpo, rwr
from genenv_trainer.training.data import Example, chat_prompt_ids, collate, make_example, text_completion_ids
from genenv_trainer.training.ops import (
    NonFiniteError,
    k3_kl,
    masked_mean_per_row,
    reference_logprobs,
    token_logprobs,
)

CPU = torch.device("cpu")
PROMPT = [{"role": "user", "content": "What is 7 + 5? Reply with the number only."}]


def _examples(tokenizer: Any, answers: list[str]) -> list[Example]:
    prompt = chat_prompt_ids(tokenizer, PROMPT)
    return [make_example(prompt, text_completion_ids(tokenizer, a), 256) for a in answers]


def _grads(model: Any) -> list[torch.Tensor]:
    return [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)
            for p in model.parameters() if p.requires_grad]


def _perturb_adapter(model: Any, scale: float = 0.05) -> None:
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, scale)


def _seq_logp(model: Any, examples: list[Example], pad_id: int) -> torch.Tensor:
    b = collate(examples, pad_id=pad_id)
    with torch.no_grad():
        return masked_mean_per_row(token_logprobs(model, b), b.completion_mask)


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_token_logprobs_equal_log_softmax_at_the_sampling_temperature(
    policy: Any, tokenizer: Any, temperature: float
) -> None:
    b = collate(_examples(tokenizer, ["12", "thirteen"]), pad_id=tokenizer.pad_token_id)
    got = token_logprobs(policy, b, temperature=temperature)
    logits = policy(input_ids=b.input_ids, attention_mask=b.attention_mask, position_ids=b.position_ids).logits
    scaled = logits[:, :-1].float() / (temperature if temperature > 0 else 1.0)  # T = 0 is greedy: the model's own
    want = torch.log_softmax(scaled, -1).gather(-1, b.input_ids[:, 1:, None]).squeeze(-1)
    mask = b.completion_mask.bool()
    assert torch.allclose(got[mask], want[mask], atol=1e-5)
    assert bool((got[~mask] == 0).all())  # the LM head never ran there


def test_the_lm_head_runs_only_on_completion_positions(policy: Any, tokenizer: Any) -> None:
    b = collate(_examples(tokenizer, ["12", "The answer is 12."]), pad_id=tokenizer.pad_token_id)
    seen: list[int] = []
    head = policy.get_base_model().get_output_embeddings()
    hook = head.register_forward_hook(lambda _m, args, _out: seen.append(args[0].shape[0]))
    try:
        with torch.no_grad():
            token_logprobs(policy, b, chunk_tokens=4)
    finally:
        hook.remove()
    assert sum(seen) == int(b.completion_mask.sum()) < b.completion_mask.numel()
    assert max(seen) <= 4


def test_chunked_logprobs_and_their_gradient_equal_the_unchunked_ones(policy: Any, tokenizer: Any) -> None:
    """The LM head runs a few positions at a time (checkpointed): values and gradients must not change."""
    _perturb_adapter(policy)
    b = collate(_examples(tokenizer, ["12", "The answer is 12."]), pad_id=tokenizer.pad_token_id)
    whole = token_logprobs(policy, b, chunk_tokens=10_000)
    whole.sum().backward()
    g_whole = _grads(policy)
    policy.zero_grad()
    chunked = token_logprobs(policy, b, chunk_tokens=3)  # 3 completion positions per chunk
    chunked.sum().backward()
    assert torch.allclose(whole, chunked, atol=1e-5)
    for a, c in zip(g_whole, _grads(policy), strict=True):
        assert torch.allclose(a, c, rtol=1e-4, atol=1e-4 * float(a.abs().max())), float((a - c).abs().max())


def test_left_and_right_padding_give_the_same_logprobs(policy: Any, tokenizer: Any) -> None:
    ex = _examples(tokenizer, ["12", "The answer is 12."])
    r = collate(ex, pad_id=tokenizer.pad_token_id, side="right")
    left = collate(ex, pad_id=tokenizer.pad_token_id, side="left")
    with torch.no_grad():
        a = masked_mean_per_row(token_logprobs(policy, r), r.completion_mask)
        b = masked_mean_per_row(token_logprobs(policy, left), left.completion_mask)
    assert torch.allclose(a, b, atol=1e-4)


def test_reference_is_the_base_model_with_the_adapter_off(
    policy: Any, tokenizer: Any, make_tiny_llama: Callable[..., Any]
) -> None:
    _perturb_adapter(policy)
    b = collate(_examples(tokenizer, ["12"]), pad_id=tokenizer.pad_token_id)
    base = make_tiny_llama(len(tokenizer))  # same seed → the same base weights the policy wraps
    with torch.no_grad():
        want = token_logprobs(base, b)
        adapted = token_logprobs(policy, b)
    got = reference_logprobs(policy, b)
    assert torch.allclose(got, want, atol=1e-5)
    assert not torch.allclose(adapted, want, atol=1e-3)
    assert not got.requires_grad


def test_k3_is_an_unbiased_nonnegative_kl_estimate() -> None:
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(50), 0)
    q = torch.softmax(torch.randn(50), 0)
    k3 = k3_kl(p.log(), q.log())
    assert (k3 >= 0).all()
    assert float((p * k3).sum()) == pytest.approx(float((p * (p.log() - q.log())).sum()), rel=1e-4)
    assert float(k3_kl(p.log(), p.log()).abs().max()) == 0.0


def test_group_advantages_and_skipped_groups() -> None:
    adv = grpo.group_advantages([1.0, 0.0, 0.0, 1.0])
    assert adv is not None and sum(adv) == pytest.approx(0.0) and adv[0] == pytest.approx(1.0, rel=1e-3)
    assert grpo.group_advantages([0.5, 0.5, 0.5]) is None

    def group(task: int, rewards: list[float]) -> RolloutGroup:
        return RolloutGroup(task, 0, [Attempt(i, PROMPT, "x", r) for i, r in enumerate(rewards)])

    scored, counts = grpo.score_groups([group(1, [1, 0]), group(2, [1, 1, 1]), group(3, [0]), group(4, [0.2, 0.9])])
    assert [s.group.task_id for s in scored] == [1, 4]
    assert counts == {"groups": 4, "groups_too_small": 1, "groups_zero_variance": 1}


def test_recorded_logprobs_are_used_only_when_they_match(tokenizer: Any) -> None:
    ids = text_completion_ids(tokenizer, "12")
    attempts = [
        Attempt(1, PROMPT, "12", 1.0, token_ids=ids, token_logprobs=[-0.5] * len(ids)),
        Attempt(2, PROMPT, "13", 0.0, token_logprobs=[-0.5]),  # one logprob for three tokens: mismatch
        Attempt(3, PROMPT, "14", 0.0),
    ]
    scored, _ = grpo.score_groups([RolloutGroup(1, 0, attempts)])
    samples, counts = grpo.to_samples(scored, tokenizer, 256)
    assert counts == {"sequences": 3, "ratio_fallback": 2, "dropped_too_long": 0}
    assert samples[0].old_logprobs == [-0.5] * len(ids) and samples[1].old_logprobs is None
    assert samples[2].example.completion_ids == text_completion_ids(tokenizer, "14")


def _samples(tokenizer: Any, advs: list[float], old_shift: float | None = None, policy: Any = None) -> list[Any]:
    ex = _examples(tokenizer, ["12", "13", "It is 12", "I think 11"][: len(advs)])
    out = []
    for e, a in zip(ex, advs, strict=True):
        old = None
        if old_shift is not None:
            b = collate([e], pad_id=tokenizer.pad_token_id)
            with torch.no_grad():
                lp = token_logprobs(policy, b)[0][b.completion_mask[0].bool()]
            old = (lp + old_shift).tolist()
        out.append(grpo.GrpoSample(e, a, old))
    return out


def test_on_policy_grpo_gradient_is_the_advantage_weighted_score_function(policy: Any, tokenizer: Any) -> None:
    samples = _samples(tokenizer, [1.0, -1.0, 0.5, -0.5])
    stats = grpo.grpo_loss_backward(policy, samples, micro_batch_size=4, clip_ratio=0.2, kl_coef=0.0,
                                    pad_id=tokenizer.pad_token_id, device=CPU)
    got = _grads(policy)
    policy.zero_grad()
    b = collate([s.example for s in samples], pad_id=tokenizer.pad_token_id)
    adv = torch.tensor([s.advantage for s in samples])
    surrogate = -(adv * masked_mean_per_row(token_logprobs(policy, b), b.completion_mask)).mean()
    surrogate.backward()
    for g, w in zip(got, _grads(policy), strict=True):
        assert torch.allclose(g, w, atol=1e-6)
    assert stats["clip_fraction"] == 0.0 and stats["mean_ratio"] == pytest.approx(1.0)


def test_micro_batches_accumulate_to_the_full_batch_gradient(policy: Any, tokenizer: Any) -> None:
    _perturb_adapter(policy)
    samples = _samples(tokenizer, [1.0, -1.0, 0.5, -0.5], old_shift=0.1, policy=policy)
    kwargs = {"clip_ratio": 0.2, "kl_coef": 0.1, "pad_id": tokenizer.pad_token_id, "device": CPU}
    full = grpo.grpo_loss_backward(policy, samples, micro_batch_size=4, **kwargs)
    g_full = _grads(policy)
    policy.zero_grad()
    micro = grpo.grpo_loss_backward(policy, samples, micro_batch_size=1, **kwargs)
    for a, b in zip(g_full, _grads(policy), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    # The loss is a sum of ±advantage-weighted terms of order 1 that cancel to ≈ 1e-3: float32 rounding of those
    # terms (≈ 1e-7 each, from matmuls over differently shaped batches) bounds the agreement in absolute terms.
    assert full["loss"] == pytest.approx(micro["loss"], rel=1e-5, abs=1e-6)
    assert full["kl"] > 0


def test_clipping_removes_the_gradient_only_where_the_ratio_left_the_trust_region(
    policy: Any, tokenizer: Any
) -> None:
    # old = logp − 1 → ratio = e > 1.2: positive advantages are clipped (no gradient), negative ones are not.
    pos = _samples(tokenizer, [1.0, 1.0], old_shift=-1.0, policy=policy)
    stats = grpo.grpo_loss_backward(policy, pos, micro_batch_size=2, clip_ratio=0.2, kl_coef=0.0,
                                    pad_id=tokenizer.pad_token_id, device=CPU)
    assert stats["clip_fraction"] == 1.0 and stats["mean_ratio"] == pytest.approx(2.71828, rel=1e-3)
    assert all(float(g.abs().max()) == 0.0 for g in _grads(policy))
    policy.zero_grad()
    neg = _samples(tokenizer, [-1.0, -1.0], old_shift=-1.0, policy=policy)
    stats = grpo.grpo_loss_backward(policy, neg, micro_batch_size=2, clip_ratio=0.2, kl_coef=0.0,
                                    pad_id=tokenizer.pad_token_id, device=CPU)
    assert stats["clip_fraction"] == 0.0
    assert any(float(g.abs().max()) > 0.0 for g in _grads(policy))


def test_train_grpo_raises_good_and_lowers_bad_completions(policy: Any, tokenizer: Any) -> None:
    samples = _samples(tokenizer, [1.0, -1.0])
    ex = [s.example for s in samples]
    before = _seq_logp(policy, ex, tokenizer.pad_token_id)
    cfg = AgentTrainConfig(learning_rate=1e-2, batch_size=2, micro_batch_size=2, max_steps_per_epoch=3)
    out = grpo.train_grpo(policy, samples, cfg, pad_id=tokenizer.pad_token_id, device=CPU, rng=random.Random(0))
    after = _seq_logp(policy, ex, tokenizer.pad_token_id)
    # One pass over two sequences in a batch of two: one step, under the bound of three.
    assert out["steps"] == 1 and out["tokens"] > 0 and len(out["per_step"]) == 1
    assert out["examples_seen"] == 2 and out["fresh_seen"] == 2 and out["replayed_seen"] == 0
    assert after[0] > before[0] and after[1] < before[1]


def test_max_steps_bounds_the_pass(policy: Any, tokenizer: Any) -> None:
    samples = _samples(tokenizer, [1.0, -1.0, 0.5, -0.5])
    cfg = AgentTrainConfig(learning_rate=1e-3, batch_size=1, micro_batch_size=1, max_steps_per_epoch=3)
    out = grpo.train_grpo(policy, samples, cfg, pad_id=tokenizer.pad_token_id, device=CPU, rng=random.Random(0))
    assert out["steps"] == 3 and out["planned_steps"] == 3 and out["examples_seen"] == 3


@pytest.mark.parametrize("step", [0, 1])
def test_a_nan_loss_fails_the_step_and_changes_no_weight(policy: Any, tokenizer: Any, step: int) -> None:
    samples = _samples(tokenizer, [1.0, -1.0])
    cfg = AgentTrainConfig(learning_rate=1e-3, batch_size=1, micro_batch_size=1, max_steps_per_epoch=2)
    seen: list[int] = []
    before: list[torch.Tensor] = []

    def on_step(i: int, _stats: dict[str, float]) -> None:
        seen.append(i)
        before[:] = [p.detach().clone() for p in policy.parameters() if p.requires_grad]

    if step == 0:
        before = [p.detach().clone() for p in policy.parameters() if p.requires_grad]
    with pytest.raises(NonFiniteError, match="loss=nan"):
        grpo.train_grpo(policy, samples, cfg, pad_id=tokenizer.pad_token_id, device=CPU, rng=random.Random(0),
                        on_step=on_step, options=grpo.StepOptions(fault_nan_at_step=step))
    assert seen == list(range(step))
    after = [p.detach() for p in policy.parameters() if p.requires_grad]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


def _rwr_samples(tokenizer: Any, weights: list[float]) -> list[rwr.RwrSample]:
    gens = [Generation(i, "s", PROMPT, text, w)
            for i, (text, w) in enumerate(zip(["{\"a\": 3, \"b\": 4}", "{\"a\": 90, \"b\": 17}"], weights,
                                              strict=True))]
    samples, counts = rwr.to_samples(gens, tokenizer, 256)
    assert counts["sequences"] == 2
    return samples


def _anchors(policy: Any, tokenizer: Any, samples: list[rwr.RwrSample]) -> dict[int, list[float]]:
    return rwr.start_logprobs(policy, samples, micro_batch_size=2, pad_id=tokenizer.pad_token_id, device=CPU)


def test_rwr_loss_is_the_batch_normalised_weighted_nll(policy: Any, tokenizer: Any) -> None:
    samples = _rwr_samples(tokenizer, [3.0, 1.0])
    stats = rwr.rwr_loss_backward(policy, samples, micro_batch_size=1, kl_coef=0.0, kl_cap=10.0,
                                  pad_id=tokenizer.pad_token_id, device=CPU,
                                  anchors=_anchors(policy, tokenizer, samples))
    g = _grads(policy)
    policy.zero_grad()
    b = collate([s.example for s in samples], pad_id=tokenizer.pad_token_id)
    nll = -masked_mean_per_row(token_logprobs(policy, b), b.completion_mask)
    want = (torch.tensor([1.5, 0.5]) * nll).mean()
    assert stats["loss"] == pytest.approx(float(want.detach()), rel=1e-5)
    assert stats["kl_to_start"] == pytest.approx(0.0, abs=1e-6)
    # Scaling every weight by the same factor changes nothing: weights are renormalised to mean 1 per batch.
    scaled = _rwr_samples(tokenizer, [30.0, 10.0])
    rwr.rwr_loss_backward(policy, scaled, micro_batch_size=2, kl_coef=0.0, kl_cap=10.0,
                          pad_id=tokenizer.pad_token_id, device=CPU, anchors=_anchors(policy, tokenizer, scaled))
    for a, c in zip(g, _grads(policy), strict=True):
        assert torch.allclose(a, c, atol=1e-6)


def test_rwr_raises_high_weight_generations_more(policy: Any, tokenizer: Any) -> None:
    samples = _rwr_samples(tokenizer, [1.9, 0.1])
    ex = [s.example for s in samples]
    before = _seq_logp(policy, ex, tokenizer.pad_token_id)
    cfg = SimulatorTrainConfig(learning_rate=3e-3, batch_size=2, micro_batch_size=2, max_steps_per_epoch=3,
                               kl_coef=0.0)
    out = rwr.train_rwr(policy, samples, cfg, pad_id=tokenizer.pad_token_id, device=CPU, rng=random.Random(0))
    gain = _seq_logp(policy, ex, tokenizer.pad_token_id) - before
    assert out["steps"] == 1 and not out["early_stopped"]  # one pass over two generations in a batch of two
    assert gain[0] > gain[1]


def test_kl_cap_stops_the_step_before_its_backward(policy: Any, tokenizer: Any) -> None:
    samples = _rwr_samples(tokenizer, [1.0, 1.0])
    anchors = _anchors(policy, tokenizer, samples)  # where the epoch started
    _perturb_adapter(policy, scale=0.2)  # the steps already taken moved the policy
    with pytest.raises(rwr.KlCapExceeded) as info:
        rwr.rwr_loss_backward(policy, samples, micro_batch_size=1, kl_coef=0.1, kl_cap=1e-9,
                              pad_id=tokenizer.pad_token_id, device=CPU, anchors=anchors)
    assert info.value.kl > 1e-9
    assert all(float(g.abs().max()) == 0.0 for g in _grads(policy))


def test_train_rwr_stops_early_and_records_it(policy: Any, tokenizer: Any) -> None:
    cfg = SimulatorTrainConfig(learning_rate=3e-3, batch_size=1, micro_batch_size=1, max_steps_per_epoch=4,
                               kl_cap=1e-7)
    out = rwr.train_rwr(policy, _rwr_samples(tokenizer, [1.0, 1.0]), cfg, pad_id=tokenizer.pad_token_id,
                        device=CPU, rng=random.Random(0))
    # Step 0 starts where the epoch starts (KL exactly 0); after it the policy has moved and step 1 is refused.
    assert out["steps"] == 1 and out["early_stopped"] and out["stopped_at_step"] == 1
    assert out["kl_at_stop"] > 1e-7 and out["planned_steps"] == 2


def test_the_kl_cap_is_per_epoch_and_never_freezes_the_simulator(policy: Any, tokenizer: Any) -> None:
    """Three epochs under a cap the first step already exceeds: each epoch still takes its first step, and the
    policy keeps moving away from the initial model (the cap bounds each update, not the run)."""
    cfg = SimulatorTrainConfig(learning_rate=3e-3, batch_size=1, micro_batch_size=1, max_steps_per_epoch=4,
                               kl_cap=1e-7, kl_coef=0.0)
    samples = _rwr_samples(tokenizer, [1.0, 1.0])
    ex = [s.example for s in samples]
    gains = []
    for epoch in range(3):
        before = _seq_logp(policy, ex, tokenizer.pad_token_id)
        out = rwr.train_rwr(policy, samples, cfg, pad_id=tokenizer.pad_token_id, device=CPU,
                            rng=random.Random(epoch))
        assert out["steps"] == 1 and out["early_stopped"] and out["stopped_at_step"] == 1
        gains.append(float((_seq_logp(policy, ex, tokenizer.pad_token_id) - before).mean()))
    assert all(g > 0 for g in gains)


def test_rwr_nan_fails_before_the_update(policy: Any, tokenizer: Any) -> None:
    cfg = SimulatorTrainConfig(learning_rate=3e-3, batch_size=2, micro_batch_size=2, max_steps_per_epoch=2)
    before = [p.detach().clone() for p in policy.parameters() if p.requires_grad]
    with pytest.raises(NonFiniteError):
        rwr.train_rwr(policy, _rwr_samples(tokenizer, [1.0, 1.0]), cfg, pad_id=tokenizer.pad_token_id, device=CPU,
                      rng=random.Random(0), options=rwr.StepOptions(fault_nan_at_step=0))
    after = [p.detach() for p in policy.parameters() if p.requires_grad]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_zero_variance_groups_take_budget_but_give_no_gradient(policy: Any, tokenizer: Any) -> None:
    """agent.budget = tasks: a zero-variance group is kept with zero advantages and signal False; in a step it
    counts in the batch size (so it dilutes the mean) but is never computed; a step of only such groups is no
    optimiser step at all."""

    def group(task: int, rewards: list[float]) -> RolloutGroup:
        return RolloutGroup(task, 0, [Attempt(i, PROMPT, str(10 + i), r) for i, r in enumerate(rewards)])

    groups = [group(1, [1.0, 0.0]), group(2, [1.0, 1.0])]
    kept, counts = grpo.score_groups(groups, keep_zero_variance=True)
    assert [(g.group.task_id, g.signal, g.advantages) for g in kept][1] == (2, False, [0.0, 0.0])
    assert counts["groups_zero_variance"] == 1
    samples, _ = grpo.to_samples(kept, tokenizer, 256)
    assert [s.signal for s in samples] == [True, True, False, False]
    kwargs = {"micro_batch_size": 4, "clip_ratio": 0.2, "kl_coef": 0.0, "pad_id": tokenizer.pad_token_id,
              "device": CPU}
    grpo.grpo_loss_backward(policy, samples, **kwargs)
    diluted = _grads(policy)
    policy.zero_grad()
    grpo.grpo_loss_backward(policy, samples[:2], **kwargs)
    for d, full in zip(diluted, _grads(policy), strict=True):
        assert torch.allclose(d, full / 2, atol=1e-7)  # the same gradient over a batch twice the size
    policy.zero_grad()
    cfg = AgentTrainConfig(learning_rate=1e-3, batch_size=2, micro_batch_size=2, max_steps_per_epoch=4)
    silent = [grpo.GrpoSample(s.example, 0.0, None, signal=False) for s in samples]
    out = grpo.train_grpo(policy, silent, cfg, pad_id=tokenizer.pad_token_id, device=CPU, rng=random.Random(0))
    assert (out["steps"], out["steps_without_signal"], out["sequences_without_signal"]) == (0, 2, 4)


def test_rwr_passes_give_a_fixed_dose_on_a_small_pool(policy: Any, tokenizer: Any) -> None:
    gens = [Generation(i, "s", PROMPT, f'{{"expression": "{i} + 1"}}', 1.0) for i in range(3)]
    samples, _ = rwr.to_samples(gens, tokenizer, 256)
    cfg = SimulatorTrainConfig(learning_rate=1e-4, batch_size=2, micro_batch_size=2, max_steps_per_epoch=5,
                               passes_per_epoch=4, kl_cap=1e9)
    out = rwr.train_rwr(policy, samples, cfg, pad_id=tokenizer.pad_token_id, device=CPU, rng=random.Random(0))
    # A pass over 3 generations is 2 steps (2 + 1); 4 passes would be 8 steps, capped at 5.
    assert out["steps"] == 5 and out["planned_steps"] == 5 and out["examples_seen"] == 2 + 1 + 2 + 1 + 2
    one = SimulatorTrainConfig(learning_rate=1e-4, batch_size=2, micro_batch_size=2, max_steps_per_epoch=5)
    assert rwr.train_rwr(policy, samples, one, pad_id=tokenizer.pad_token_id, device=CPU,
                         rng=random.Random(0))["steps"] == 2
