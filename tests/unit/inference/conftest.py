"""Fixtures of the inference unit tests: a tiny random Llama with the real SmolLM2 tokenizer, SQLite databases."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from genenv.db import migrate
from genenv.db.engine import make_engine, make_session_factory
from genenv.settings import DatabaseSettings

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ≈3.5M-parameter random Llama saved with SmolLM2's tokenizer and chat template (fp32, fast on CPU)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    # Random init gives near-uniform logits; sharpen them so greedy and sampling differ in visible ways.
    with torch.no_grad():
        model.model.embed_tokens.weight.mul_(8.0)
    folder = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


@pytest.fixture(scope="session")
def tiny_lora_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter for the tiny model with NON-zero weights (init_lora_weights=False), so it changes outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    peft_model = get_peft_model(
        base, LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj", "o_proj"], init_lora_weights=False)
    )
    folder = tmp_path_factory.mktemp("tiny-lora")
    peft_model.save_pretrained(str(folder))
    return folder


@pytest.fixture()
def sqlite_sessions(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    """A fresh SQLite database at the migration head."""
    url = f"sqlite:///{tmp_path / 'genenv.db'}"
    migrate.upgrade(url)
    engine = make_engine(DatabaseSettings(url=url))
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()
