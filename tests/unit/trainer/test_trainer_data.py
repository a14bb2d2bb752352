"""Tokenisation, prompt masking, padding and step batching of the trainer."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from genenv_trainer.training.data import (
    Example,
    TooLongError,
    chat_prompt_ids,
    collate,
    epoch_batches,
    make_example,
    text_completion_ids,
)


def test_chat_prompt_matches_what_vllm_renders(tokenizer: Any) -> None:
    # vLLM's prompt_token_ids for this chat on the dev server (the chat template adds the default system turn).
    ids = chat_prompt_ids(tokenizer, [{"role": "user", "content": "What is 2+3? Reply with the number only."}])
    assert ids[:3] == [1, 9690, 198] and ids[-3:] == [520, 9531, 198] and len(ids) == 44


def test_text_completion_ends_with_end_of_turn(tokenizer: Any) -> None:
    ids = text_completion_ids(tokenizer, "2 + 3 = 5")
    assert ids == [34, 1232, 216, 35, 446, 216, 37, tokenizer.eos_token_id]


def test_collate_masks_the_prompt_and_places_values() -> None:
    a = Example([10, 11, 12], [20, 21])
    b = Example([10], [30, 31, 32, 33])
    batch = collate([a, b], pad_id=0, values=[[-1.0, -2.0], None])
    assert batch.input_ids.tolist() == [[10, 11, 12, 20, 21], [10, 30, 31, 32, 33]]
    # label j predicts token j+1: a's completion tokens 20, 21 are labels at 2, 3
    assert batch.completion_mask.tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]
    assert batch.values is not None
    assert batch.values[0, 2:4].tolist() == [-1.0, -2.0]
    assert torch.isnan(batch.values[0, :2]).all() and torch.isnan(batch.values[1]).all()
    labels = batch.input_ids[:, 1:]
    assert labels[batch.completion_mask.bool()].tolist() == [20, 21, 30, 31, 32, 33]


@pytest.mark.parametrize("side", ["right", "left"])
def test_padding_sides(side: str) -> None:
    a = Example([1, 2], [3])
    b = Example([1, 2, 4, 5], [6, 7])
    batch = collate([a, b], pad_id=0, side=side)  # type: ignore[arg-type]
    assert batch.attention_mask.sum(1).tolist() == [3, 6]
    labels = batch.input_ids[:, 1:]
    assert labels[0][batch.completion_mask[0].bool()].tolist() == [3]
    assert labels[1][batch.completion_mask[1].bool()].tolist() == [6, 7]
    # positions count real tokens only, so both sides give the same positions to the same tokens
    real = batch.attention_mask.bool()
    assert batch.position_ids[0][real[0]].tolist() == [0, 1, 2]


def test_an_example_too_long_is_refused_never_cut() -> None:
    assert make_example([1, 2, 3], [4, 5], 10) == Example([1, 2, 3], [4, 5])
    assert make_example([1, 2, 3], [4, 5], 5) == Example([1, 2, 3], [4, 5])
    with pytest.raises(TooLongError):
        make_example(list(range(10)), [100, 101, 102, 103, 104, 105, 106, 107], 8)
    with pytest.raises(TooLongError):
        make_example(list(range(20)), [100], 8)
    with pytest.raises(ValueError):
        make_example([1], [], 8)


@given(n=st.integers(0, 30), bs=st.integers(1, 12), max_steps=st.integers(1, 6), seed=st.integers(0, 5))
def test_epoch_batches_make_one_pass_bounded_by_max_steps(n: int, bs: int, max_steps: int, seed: int) -> None:
    items = [object() for _ in range(n)]
    batches = epoch_batches(items, batch_size=bs, max_steps=max_steps, rng=random.Random(seed))
    # As many steps as the data supports (one pass), never more than the bound.
    assert len(batches) == min(max_steps, math.ceil(n / bs))
    assert all(0 < len(b) <= bs for b in batches)
    seen = [id(x) for b in batches for x in b]
    assert len(set(seen)) == len(seen)  # no item twice in an epoch
    if math.ceil(n / bs) <= max_steps:
        assert len(seen) == n  # the whole pass fits: every item is seen once
