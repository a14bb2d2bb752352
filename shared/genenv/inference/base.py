"""The one interface both inference backends implement (vLLM over HTTP, transformers in-process)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from genenv.contracts.tasks import ChatMessage


@dataclass(frozen=True)
class Completion:
    """One generated completion with what training needs: token ids and their sampling log-probabilities."""

    text: str
    token_ids: list[int] = field(default_factory=list)
    token_logprobs: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    latency_s: float = 0.0


class InferenceError(RuntimeError):
    """A request failed after the allowed retries (or was refused by the server)."""


class InferenceBackend(Protocol):
    """Async chat/completion with a per-request LoRA adapter (``adapter=None`` = the base model)."""

    async def chat(
        self,
        messages: list[ChatMessage],
        *,
        adapter: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 256,
        logprobs: bool = False,
        json_schema: dict[str, Any] | None = None,
        stop: list[str] | None = None,
    ) -> Completion:
        """One chat completion."""
        ...

    async def chat_many(
        self,
        messages: list[ChatMessage],
        n: int,
        *,
        adapter: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 256,
        logprobs: bool = False,
        json_schema: dict[str, Any] | None = None,
        stop: list[str] | None = None,
    ) -> list[Completion]:
        """``n`` independent samples for one prompt, in one request where the backend can: the prompt is
        prefilled once for all of them (the G attempts of a task, the n variations of a seed)."""
        ...

    async def complete(
        self,
        prompt: str,
        *,
        adapter: str | None = None,
        temperature: float = 0.0,
        max_tokens: int = 256,
        logprobs: bool = False,
        stop: list[str] | None = None,
    ) -> Completion:
        """One plain-text completion."""
        ...

    async def aclose(self) -> None:
        """Release connections / models."""
        ...
