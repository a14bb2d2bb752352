"""A tiny random Llama (≈6.4M parameters) with the real SmolLM2 tokenizer, for fast tests of the loss math."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch


@pytest.fixture(scope="session")
def tokenizer(model_dir: Path) -> Any:
    from genenv_trainer.training.lora import load_tokenizer

    return load_tokenizer(model_dir)


def tiny_llama(vocab: int, seed: int = 0) -> Any:
    """Random LlamaForCausalLM small enough to train in a fraction of a second per step."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=2,
    )
    return LlamaForCausalLM(cfg)


@pytest.fixture
def make_tiny_llama() -> Callable[..., Any]:
    """The builder, for tests that need a second copy of the base weights."""
    return tiny_llama


@pytest.fixture
def policy(tokenizer: Any) -> Any:
    """The tiny model with a fresh LoRA adapter on q/k/v/o (B = 0: identical to the base at first)."""
    from peft import LoraConfig, get_peft_model

    torch.set_num_threads(1)
    model = get_peft_model(
        tiny_llama(len(tokenizer)),
        LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM"),
    )
    model.train()
    return model
