"""Fixtures of the inference integration tests: a non-zero LoRA adapter for the real model, Postgres sessions."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from genenv.db import migrate
from genenv.db.engine import make_engine, make_session_factory
from genenv.settings import DatabaseSettings, InferenceSettings

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def real_lora_dirs(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Three LoRA adapters (r=8, q/k/v/o) for SmolLM2-135M with random, NON-zero A and B matrices.

    PEFT's default init makes B = 0 (a no-op adapter); init_lora_weights=False randomises both, so serving the
    adapter must change the model's output.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    base = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.bfloat16)
    folders = []
    for i in range(3):
        torch.manual_seed(100 + i)
        cfg = LoraConfig(
            r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], init_lora_weights=False
        )
        peft_model = get_peft_model(base, cfg)
        folder = tmp_path_factory.mktemp(f"lora-{i}")
        peft_model.save_pretrained(str(folder))
        base = peft_model.unload()  # drop the LoRA layers again before making the next adapter
        folders.append(folder)
    return folders


@pytest.fixture(scope="session")
def pg_sessions(pg_url: str) -> Iterator[sessionmaker[Session]]:
    """Sessions on the session's fresh Postgres database, migrated to head."""
    migrate.upgrade(pg_url)
    engine = make_engine(DatabaseSettings(url=pg_url))
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


@pytest.fixture()
def inference_settings() -> InferenceSettings:
    """Client settings for the test server: bounded concurrency and a generous timeout on a busy 2-core box."""
    return InferenceSettings(max_concurrency=16, request_timeout_s=300.0, connect_retries=2)
