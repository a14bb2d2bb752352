"""Secure-by-default settings: auth.required refuses an open service; the vLLM API key reaches every vLLM call."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from genenv.contracts.adapters import Role
from genenv.http import make_app
from genenv.http.app import AuthRequiredError
from genenv.inference.base import SamplingParams
from genenv.inference.factory import build_backends
from genenv.serving.publisher import AdapterPublishError, build_adapter_servers
from genenv.settings import GenEnvSettings

API_KEY = "vllm-test-key"


def test_a_required_auth_without_tokens_refuses_to_build_the_app() -> None:
    settings = GenEnvSettings(auth={"required": True, "tokens": []})
    with pytest.raises(AuthRequiredError, match="GENENV_AUTH__TOKENS is empty"):
        make_app("control-plane", settings, routers=[])
    # An empty string is no token either: a blank secret value must not count as configured.
    with pytest.raises(AuthRequiredError):
        make_app("control-plane", GenEnvSettings(auth={"required": True, "tokens": [""]}), routers=[])


def test_a_required_auth_with_tokens_and_the_embedded_default_both_start() -> None:
    make_app("control-plane", GenEnvSettings(auth={"required": True, "tokens": ["t"]}), routers=[])
    assert GenEnvSettings().auth.required is False
    make_app("control-plane", GenEnvSettings(), routers=[])


class _FakeVLLM(BaseHTTPRequestHandler):
    """Answers like vLLM started with --api-key: 401 without the bearer key, else minimal OpenAI responses."""

    seen: ClassVar[list[tuple[str, str | None]]] = []

    def _reply(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        auth = self.headers.get("Authorization")
        self.seen.append((self.path, auth))
        if auth != f"Bearer {API_KEY}":
            self._reply(401, {"error": "Unauthorized"})
        elif self.path == "/v1/models":
            self._reply(200, {"data": [{"id": "base"}, {"id": "agent-v1", "parent": "base"}]})
        elif self.path == "/v1/completions":
            self._reply(
                200,
                {
                    "choices": [{"text": " 7", "finish_reason": "stop", "token_ids": [36]}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
                },
            )
        else:
            self._reply(200, {})

    do_GET = _handle
    do_POST = _handle

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def fake_vllm() -> Iterator[str]:
    _FakeVLLM.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeVLLM)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_the_factory_clients_send_the_vllm_api_key(fake_vllm: str) -> None:
    settings = GenEnvSettings(
        inference={"backend": "vllm", "api_key": API_KEY, "connect_retries": 0},
        services={"vllm_agent": fake_vllm, "vllm_simulator": fake_vllm},
    )
    backends = build_backends(settings)
    servers = build_adapter_servers(settings, backends)
    completion = await backends[Role.AGENT].complete("3 + 4 =", sampling=SamplingParams(max_tokens=1))
    assert completion.text == " 7"
    assert await servers[Role.AGENT].list_adapters() == {"agent-v1"}
    await servers[Role.SIMULATOR].load_adapter("simulator-v1", "/adapters/simulator/1")
    await backends[Role.AGENT].aclose()
    await servers[Role.AGENT].aclose()  # type: ignore[attr-defined]
    paths = [path for path, _ in _FakeVLLM.seen]
    assert paths == ["/v1/completions", "/v1/models", "/v1/load_lora_adapter"]
    assert {auth for _, auth in _FakeVLLM.seen} == {f"Bearer {API_KEY}"}


async def test_without_a_key_the_server_refuses_the_adapter_calls(fake_vllm: str) -> None:
    settings = GenEnvSettings(inference={"backend": "vllm"}, services={"vllm_agent": fake_vllm})
    servers = build_adapter_servers(settings, build_backends(settings))
    with pytest.raises(AdapterPublishError, match="HTTP 401"):
        await servers[Role.AGENT].list_adapters()
    assert _FakeVLLM.seen == [("/v1/models", None)]
