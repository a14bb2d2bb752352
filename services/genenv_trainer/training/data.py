"""Tokenise (chat prompt, completion) pairs, mask the prompt, pad into batches."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import torch

T = TypeVar("T")


@dataclass(frozen=True)
class Example:
    """Token ids of a prompt and of the completion that is trained on (the only tokens the loss sees)."""

    prompt_ids: list[int]
    completion_ids: list[int]


class TooLongError(ValueError):
    """Prompt + completion exceed max_seq_len: the example is dropped and counted, never cut."""


@dataclass
class Batch:
    """Padded tensors. ``completion_mask``/``values`` are aligned with the labels ``input_ids[:, 1:]``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    completion_mask: torch.Tensor
    values: torch.Tensor | None = None

    def to(self, device: torch.device) -> Batch:
        """The same batch on ``device``."""
        return Batch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.position_ids.to(device),
            self.completion_mask.to(device),
            None if self.values is None else self.values.to(device),
        )


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, Any]]) -> list[int]:
    """The prompt exactly as the server renders it: chat template plus the assistant header."""
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
    return list(out["input_ids"])


def text_completion_ids(tokenizer: Any, text: str) -> list[int]:
    """Completion tokens of a response text, closed with the end-of-turn token the model must learn to emit."""
    return [*tokenizer(text, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]


def make_example(prompt_ids: list[int], completion_ids: list[int], max_seq_len: int) -> Example:
    """The (prompt, completion) pair, or TooLongError when it exceeds ``max_seq_len``.

    Never cut: a prompt cut at the front is not the context the policy answered, and a completion cut at the tail
    is not the reply that was scored, so training on either teaches something nobody did.
    """
    if not completion_ids:
        raise ValueError("empty completion: nothing to train on")
    total = len(prompt_ids) + len(completion_ids)
    if total > max_seq_len:
        raise TooLongError(f"{total} tokens exceed max_seq_len {max_seq_len}")
    return Example(list(prompt_ids), list(completion_ids))


def collate(
    examples: Sequence[Example],
    *,
    pad_id: int,
    values: Sequence[Sequence[float] | None] | None = None,
    side: Literal["right", "left"] = "right",
) -> Batch:
    """Pad examples to one length. ``values`` (e.g. rollout-time logprobs, one per completion token) are placed
    on the completion positions of the label grid; NaN marks positions without a value."""
    lengths = [len(e.prompt_ids) + len(e.completion_ids) for e in examples]
    width = max(lengths)
    n = len(examples)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    completion = torch.zeros((n, width - 1), dtype=torch.float32)
    grid = torch.full((n, width - 1), float("nan"), dtype=torch.float32) if values is not None else None
    for i, (e, length) in enumerate(zip(examples, lengths, strict=True)):
        start = 0 if side == "right" else width - length
        input_ids[i, start : start + length] = torch.tensor(e.prompt_ids + e.completion_ids, dtype=torch.long)
        attention[i, start : start + length] = 1
        # Label position j predicts token j+1, so completion token c sits at label index start+len(prompt)-1+c.
        first = start + len(e.prompt_ids) - 1
        completion[i, first : first + len(e.completion_ids)] = 1.0
        row = values[i] if values is not None else None
        if grid is not None and row is not None:
            grid[i, first : first + len(row)] = torch.tensor(list(row), dtype=torch.float32)
    # Explicit positions make left and right padding give identical logits for the real tokens.
    positions = (attention.cumsum(dim=1) - 1).clamp(min=0)
    return Batch(input_ids, attention, positions, completion, grid)


def chunks(items: Sequence[T], size: int) -> Iterator[list[T]]:
    """Consecutive slices of at most ``size`` items (micro-batches of an optimiser batch)."""
    for i in range(0, len(items), size):
        yield list(items[i : i + size])


def epoch_batches(items: Sequence[T], *, batch_size: int, max_steps: int, rng: random.Random) -> list[list[T]]:
    """One shuffled pass over ``items`` in optimiser batches of ``batch_size`` (the last may be smaller), at most
    ``max_steps`` of them: as many steps as the data supports, bounded by the setting."""
    order = list(items)
    rng.shuffle(order)
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    return batches[:max_steps]
