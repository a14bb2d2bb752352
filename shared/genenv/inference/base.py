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


@dataclass(frozen=True)
class SamplingParams:
    """How one completion is sampled, one object for every backend call (as vLLM's ``SamplingParams``); the
    default is greedy, 256 tokens, no log-probs."""

    temperature: float = 0.0
    max_tokens: int = 256
    logprobs: bool = False
    """Return the sampled tokens' ids and log-probabilities (what training needs)."""
    json_schema: dict[str, Any] | None = None
    """Guided decoding to this JSON schema (chat only)."""
    stop: tuple[str, ...] = ()


GREEDY = SamplingParams()


class InferenceError(RuntimeError):
    """A request failed after the allowed retries (or was refused by the server)."""


class InferenceBackend(Protocol):
    """Async chat/completion with a per-request LoRA adapter (``adapter=None`` = the base model)."""

    async def chat(
        self, messages: list[ChatMessage], *, sampling: SamplingParams = GREEDY, adapter: str | None = None
    ) -> Completion:
        """One chat completion."""
        ...

    async def chat_many(
        self, messages: list[ChatMessage], n: int, *, sampling: SamplingParams = GREEDY, adapter: str | None = None
    ) -> list[Completion]:
        """``n`` independent samples for one prompt, in one request where the backend can: the prompt is
        prefilled once for all of them (the G attempts of a task, the n variations of a seed)."""
        ...

    async def complete(
        self, prompt: str, *, sampling: SamplingParams = GREEDY, adapter: str | None = None
    ) -> Completion:
        """One plain-text completion (``sampling.json_schema`` must be None)."""
        ...

    async def aclose(self) -> None:
        """Release connections / models."""
        ...
