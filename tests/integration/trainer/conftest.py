"""Trainer integration fixtures: private migrated databases, a tiny saved model, the adapter store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from sqlalchemy.orm import Session, sessionmaker

from genenv.db.engine import make_engine, make_session_factory
from genenv.db.migrate import upgrade
from genenv.settings import DatabaseSettings


@pytest.fixture(scope="session")
def trainer_pg(new_pg_database: Callable[[], str]) -> Callable[[], str]:
    """Private empty Postgres databases (the shared factory in tests/conftest.py)."""
    return new_pg_database


@pytest.fixture(
    scope="module", params=[pytest.param("sqlite"), pytest.param("postgres", marks=pytest.mark.postgres)]
)
def db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A migrated database: a SQLite file or a private database on the real Postgres server."""
    if request.param == "sqlite":
        url = f"sqlite:///{Path(tmp_path_factory.mktemp('trndb')) / 'genenv.db'}"
    else:
        url = request.getfixturevalue("trainer_pg")()
    upgrade(url)
    return url


@pytest.fixture(scope="module")
def sessions(db_url: str) -> Iterator[sessionmaker[Session]]:
    """Session factory on db_url."""
    engine = make_engine(DatabaseSettings(url=db_url))
    try:
        yield make_session_factory(engine)
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def tiny_model_dir(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama saved with the real SmolLM2 tokenizer: the whole job path in well under a second."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    out = tmp_path_factory.mktemp("tiny-llama")
    tok = AutoTokenizer.from_pretrained(model_dir)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=False,
        bos_token_id=1, eos_token_id=2, pad_token_id=2,
    )
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out
