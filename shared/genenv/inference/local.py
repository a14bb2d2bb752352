"""In-process backend (transformers + peft) for the embedded default and fast tests; same protocol as vLLM.

JSON-schema guided decoding uses xgrammar (the grammar engine vLLM uses), so the simulator writes parseable
tasks here too.

The base model is loaded once, on first use. LoRA adapters are looked up by name in a registry of paths and
loaded into one PeftModel on first use (or eagerly by ``load_adapter``, the in-process equivalent of vLLM's
``/v1/load_lora_adapter``). Generation runs in one worker thread so the event loop stays free; requests that
arrive together are decoded as one left-padded batch per adapter.

Device: ``device="auto"`` runs on CUDA when torch sees a GPU (bf16 there with ``dtype="auto"``), else on the CPU
(bf16 on CPUs that compute it natively). Each decoding step picks every row's token in one batched computation and
brings the chosen tokens and their log-probs to the host in one transfer: the host needs them anyway (end of
sequence, stop strings, the grammar matcher), but not one synchronisation per row and per value.

Reproducibility: request i (in submission order) samples with its own ``torch.Generator`` seeded
``seed + i``, so a batch's composition does not change what a request samples. A sampled token is
argmax(p / q) with q ~ Exp(1) drawn from the request's generator, which is exactly what ``torch.multinomial(p, 1)``
computes, so on the CPU the batched step samples the same tokens as the per-row loop it replaced (tested); on CUDA
the generator's stream differs from the CPU's, so a seed reproduces on the same kind of device only.
Log-probabilities are those of the distribution each token was sampled from (temperature and grammar mask
applied; greedy: the model's own), the convention the launcher asks vLLM for (``--logprobs-mode
processed_logprobs``) and the trainer's ratio uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv.contracts.tasks import ChatMessage
from genenv.hardware import DeviceSetting, DtypeSetting, resolve_device, resolve_dtype
from genenv.inference.base import GREEDY, Completion, InferenceError, SamplingParams


@dataclass
class _Request:
    """One generation request as the worker thread sees it."""

    prompt: str
    adapter: str | None
    temperature: float
    max_tokens: int
    stop: list[str]
    seed: int
    submitted: float
    future: asyncio.Future[Completion] = field(repr=False)
    json_schema: str | None = None


class LocalBackend:
    """InferenceBackend running a Hugging Face model in this process."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        adapters: Mapping[str, str | Path] | None = None,
        seed: int = 0,
        max_batch: int = 8,
        dtype: DtypeSetting = "auto",
        device: DeviceSetting = "auto",
        num_threads: int | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.server_id = f"local:{self.model_path}"
        self._registry: dict[str, str] = {k: str(v) for k, v in (adapters or {}).items()}
        self._max_batch = max_batch
        self._dtype_setting: DtypeSetting = dtype
        self._device_setting: DeviceSetting = device
        self.device: str | None = None
        """'cpu' or 'cuda' once the model is loaded."""
        self.dtype: str | None = None
        """'bfloat16' or 'float32' once the model is loaded."""
        self._num_threads = num_threads
        self._counter = itertools.count(seed)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="genenv-local")
        self._base: Any = None
        self._peft: Any = None
        self._tokenizer: Any = None
        self._eos_ids: set[int] = set()
        self._loaded: set[str] = set()
        self._queue: asyncio.Queue[_Request] | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._grammar_compiler: Any = None
        self._grammars: dict[str, Any] = {}
        self._vocab_size = 0
        self._bit_shifts: Any = None

    # ---- protocol -------------------------------------------------------------------------------------------

    async def chat(
        self, messages: list[ChatMessage], *, sampling: SamplingParams = GREEDY, adapter: str | None = None
    ) -> Completion:
        """One chat completion (always with token ids and logprobs)."""
        await self._run(self._ensure_loaded)
        prompt = self._tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        return await self._submit(str(prompt), adapter, sampling)

    async def chat_many(
        self, messages: list[ChatMessage], n: int, *, sampling: SamplingParams = GREEDY, adapter: str | None = None
    ) -> list[Completion]:
        """``n`` samples: n requests, which the dispatcher decodes in one batch (this backend has no prefix
        sharing; it exists for tests and tiny runs)."""
        return list(await asyncio.gather(*(self.chat(messages, sampling=sampling, adapter=adapter) for _ in range(n))))

    async def complete(
        self, prompt: str, *, sampling: SamplingParams = GREEDY, adapter: str | None = None
    ) -> Completion:
        """One plain-text completion."""
        if sampling.json_schema is not None:
            raise ValueError("guided decoding (json_schema) is for chat completions only")
        return await self._submit(prompt, adapter, sampling)

    async def aclose(self) -> None:
        """Stop the dispatcher, free the model and the worker thread."""
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, RuntimeError):
                await self._dispatcher
        self._dispatcher = None
        self._queue = None
        self._executor.shutdown(wait=True)
        self._base = self._peft = self._tokenizer = None
        self._loaded.clear()

    # ---- in-process adapter publishing (what /v1/load_lora_adapter is for vLLM) --------------------------------

    async def load_adapter(self, name: str, path: str) -> None:
        """Register and load an adapter now, so a bad path fails here and not at the first request."""
        self._registry[name] = path
        try:
            await self._run(self._ensure_adapter, name)
        except Exception:
            self._registry.pop(name, None)
            raise

    async def unload_adapter(self, name: str) -> None:
        """Forget an adapter (no-op when it is not loaded)."""
        self._registry.pop(name, None)
        await self._run(self._drop_adapter, name)

    async def list_adapters(self) -> set[str]:
        """Adapter names this backend serves."""
        return set(self._registry)

    # ---- dispatching --------------------------------------------------------------------------------------------

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def _submit(self, prompt: str, adapter: str | None, sampling: SamplingParams) -> Completion:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._dispatcher is None or self._dispatcher.done():
            # A new event loop (e.g. one asyncio.run per Celery task): the old queue and task belong to the dead one.
            self._loop = loop
            self._queue = asyncio.Queue()
            self._dispatcher = loop.create_task(self._dispatch())
        assert self._queue is not None
        request = _Request(
            prompt=prompt,
            adapter=adapter,
            temperature=sampling.temperature,
            max_tokens=sampling.max_tokens,
            stop=list(sampling.stop),
            seed=next(self._counter),
            submitted=time.perf_counter(),
            future=loop.create_future(),
            json_schema=None if sampling.json_schema is None else json.dumps(sampling.json_schema, sort_keys=True),
        )
        self._queue.put_nowait(request)
        return await request.future

    async def _dispatch(self) -> None:
        assert self._queue is not None
        queue = self._queue
        while True:
            batch = [await queue.get()]
            await asyncio.sleep(0)  # let requests submitted in the same tick join this batch
            while len(batch) < self._max_batch and not queue.empty():
                batch.append(queue.get_nowait())
            by_adapter: dict[str | None, list[_Request]] = {}
            for req in batch:
                by_adapter.setdefault(req.adapter, []).append(req)
            for group in by_adapter.values():
                live = [r for r in group if not r.future.done()]
                if not live:
                    continue
                try:
                    results = await self._run(self._generate_batch, live)
                except Exception as exc:  # the whole group failed (bad adapter, OOM): each caller sees it
                    error = exc if isinstance(exc, InferenceError) else InferenceError(f"local generation: {exc!r}")
                    for req in live:
                        if not req.future.done():
                            req.future.set_exception(error)
                    continue
                for req, completion in zip(live, results, strict=True):
                    if not req.future.done():
                        req.future.set_result(completion)

    # ---- worker thread ------------------------------------------------------------------------------------------

    def _ensure_loaded(self) -> None:
        if self._base is not None:
            return
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        device = resolve_device(self._device_setting, name="inference.local_device")
        dtype = resolve_dtype(self._dtype_setting, device)
        if self._num_threads and device == "cpu":
            torch.set_num_threads(self._num_threads)
        tokenizer = AutoTokenizer.from_pretrained(str(self.model_path))
        # On CUDA the weights go straight to the GPU (device_map) instead of through a full copy in host memory.
        placement = {"device_map": device} if device == "cuda" else {}
        model = AutoModelForCausalLM.from_pretrained(str(self.model_path), dtype=getattr(torch, dtype), **placement)
        self.device, self.dtype = device, dtype
        model.eval()
        eos = model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if tokenizer.eos_token_id is not None:
            eos_ids.add(int(tokenizer.eos_token_id))
        self._tokenizer, self._base, self._eos_ids = tokenizer, model, eos_ids

    def _ensure_adapter(self, name: str) -> None:
        self._ensure_loaded()
        if name in self._loaded:
            return
        path = self._registry.get(name)
        if path is None:
            raise InferenceError(f"unknown adapter {name!r}; publish it first (known: {sorted(self._registry)})")
        from peft import PeftModel

        try:
            if self._peft is None:
                self._peft = PeftModel.from_pretrained(self._base, path, adapter_name=name)
                self._peft.eval()
            else:
                self._peft.load_adapter(path, adapter_name=name)
        except Exception as exc:
            raise InferenceError(f"cannot load adapter {name!r} from {path}: {exc}") from exc
        self._loaded.add(name)

    def _drop_adapter(self, name: str) -> None:
        if name in self._loaded and self._peft is not None:
            others = sorted(self._loaded - {name})
            if others and self._peft.active_adapter == name:
                self._peft.set_adapter(others[0])  # PEFT warns when the active adapter is deleted
            self._peft.delete_adapter(name)
            self._loaded.discard(name)

    @contextlib.contextmanager
    def _selected(self, adapter: str | None) -> Iterator[Any]:
        """The module to call with ``adapter`` active (the base model with adapters disabled for None)."""
        if adapter is not None:
            self._ensure_adapter(adapter)
            self._peft.set_adapter(adapter)
            yield self._peft
        elif self._peft is not None:
            with self._peft.disable_adapter():
                yield self._peft
        else:
            yield self._base

    def _generate_batch(self, requests: list[_Request]) -> list[Completion]:
        """Decode a batch of prompts with one adapter: left padding, KV cache, per-request sampling."""
        import torch

        self._ensure_loaded()
        tok = self._tokenizer
        device = torch.device(self.device or "cpu")
        prompts = [tok(r.prompt, add_special_tokens=False).input_ids for r in requests]
        width = max(len(p) for p in prompts)
        pad = tok.pad_token_id if tok.pad_token_id is not None else next(iter(self._eos_ids))
        input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        n = len(requests)
        # Greedy rows divide by 1.0 (the logits unchanged, bit for bit) and never draw from their generator.
        sampled = [i for i, r in enumerate(requests) if r.temperature > 0.0]
        generators = {i: torch.Generator(device=device).manual_seed(requests[i].seed) for i in sampled}
        temperatures = torch.tensor([[r.temperature if r.temperature > 0.0 else 1.0] for r in requests],
                                    dtype=torch.float32, device=device)
        greedy = torch.tensor([r.temperature <= 0.0 for r in requests], device=device)
        out_ids: list[list[int]] = [[] for _ in range(n)]
        out_lps: list[list[float]] = [[] for _ in range(n)]
        finish: list[str | None] = [None] * n
        cut_texts: list[str | None] = [None] * n
        limit = max(r.max_tokens for r in requests)
        matchers = [None if r.json_schema is None else self._matcher(r.json_schema) for r in requests]
        with torch.inference_mode(), self._selected(requests[0].adapter) as model:
            out = model(
                input_ids=input_ids, attention_mask=attention, position_ids=positions, use_cache=True, logits_to_keep=1
            )
            for _ in range(limit):
                logits = out.logits[:, -1, :].float()
                constrained = [i for i, m in enumerate(matchers) if m is not None and finish[i] is None]
                if constrained:
                    logits = self._masked(matchers, constrained, logits)
                live_sampled = [i for i in sampled if finish[i] is None]
                tokens, logprobs = _pick(logits, temperatures, greedy, {i: generators[i] for i in live_sampled})
                # The step's one device → host transfer: token ids (exact in float64) and log-probs together.
                picked = torch.stack((tokens.to(torch.float64), logprobs.to(torch.float64))).tolist()
                next_tokens = [
                    pad if finish[i] is not None
                    else self._accept(req, int(picked[0][i]), picked[1][i], i, out_ids, out_lps, finish, cut_texts,
                                      matchers[i])
                    for i, req in enumerate(requests)
                ]
                if all(f is not None for f in finish):
                    break
                attention = torch.cat([attention, torch.ones((n, 1), dtype=attention.dtype, device=device)], dim=1)
                positions = positions[:, -1:] + 1
                out = model(
                    input_ids=torch.tensor(next_tokens, device=device).unsqueeze(1),
                    attention_mask=attention,
                    position_ids=positions,
                    past_key_values=out.past_key_values,
                    use_cache=True,
                )
        done = time.perf_counter()
        texts = [c if c is not None else str(tok.decode(ids, skip_special_tokens=True))
                 for c, ids in zip(cut_texts, out_ids, strict=True)]
        return [
            Completion(
                text=texts[i],
                token_ids=out_ids[i],
                token_logprobs=out_lps[i],
                prompt_tokens=len(prompts[i]),
                completion_tokens=len(out_ids[i]),
                finish_reason=finish[i] or "length",
                latency_s=done - req.submitted,
            )
            for i, req in enumerate(requests)
        ]

    def _accept(
        self,
        req: _Request,
        token: int,
        logprob: float,
        i: int,
        out_ids: list[list[int]],
        out_lps: list[list[float]],
        finish: list[str | None],
        cut_texts: list[str | None],
        matcher: Any,
    ) -> int:
        """Append row ``i``'s sampled token, decide whether the row is finished (a stop, the token limit, a complete
        JSON value) and advance its grammar matcher; the token to feed back."""
        out_ids[i].append(token)
        out_lps[i].append(logprob)
        finish[i], cut_texts[i] = self._finished(req, out_ids[i])
        if matcher is not None and finish[i] is None:
            matcher.accept_token(token)
            if matcher.is_terminated():  # the JSON value is complete
                finish[i] = "stop"
        return token

    # ---- guided decoding (JSON schema), the in-process counterpart of vLLM's structured outputs ------------------

    def _matcher(self, schema: str) -> Any:
        """A fresh xgrammar matcher for a JSON schema (grammars compiled once per schema and cached)."""
        import xgrammar as xgr

        if self._grammar_compiler is None:
            info = xgr.TokenizerInfo.from_huggingface(self._tokenizer, vocab_size=self._base.config.vocab_size)
            self._grammar_compiler = xgr.GrammarCompiler(info)
            self._vocab_size = info.vocab_size
        if schema not in self._grammars:
            # No free whitespace between JSON tokens: with it a weak model can pad with spaces until max_tokens.
            self._grammars[schema] = self._grammar_compiler.compile_json_schema(schema, any_whitespace=False)
        return xgr.GrammarMatcher(self._grammars[schema])

    def _masked(self, matchers: list[Any], rows: list[int], logits: Any) -> Any:
        """Logits with every token the grammar forbids next set to -inf, for the grammar-constrained ``rows``.

        The bits are unpacked with torch on the logits' device rather than by xgrammar's apply kernel, which on CUDA
        wants Triton or a compiled extension a GPU machine may lack; the result is the same -inf wherever a bit is 0.
        """
        import torch
        import xgrammar as xgr

        bitmask = xgr.allocate_token_bitmask(len(rows), self._vocab_size)
        for k, i in enumerate(rows):
            matchers[i].fill_next_token_bitmask(bitmask, index=k)
        if self._bit_shifts is None or self._bit_shifts.device != logits.device:
            self._bit_shifts = torch.arange(32, dtype=torch.int32, device=logits.device)
        bits = (bitmask.to(logits.device).unsqueeze(-1) >> self._bit_shifts) & 1  # token 32w + b is bit b of word w
        allowed = bits.reshape(len(rows), -1)[:, : logits.shape[-1]].bool()
        index = torch.tensor(rows, device=logits.device)
        masked = logits.clone()
        masked[index] = logits[index].masked_fill(~allowed, float("-inf"))
        return masked

    def _finished(self, req: _Request, ids: list[int]) -> tuple[str | None, str | None]:
        """(finish reason, text cut at a stop string) once the request is done, else (None, None)."""
        if ids[-1] in self._eos_ids:
            return "stop", None
        if req.stop:
            text = self._tokenizer.decode(ids, skip_special_tokens=True)
            cuts = [text.find(s) for s in req.stop if s and s in text]
            if cuts:
                return "stop", text[: min(cuts)]
        if len(ids) >= req.max_tokens:
            return "length", None
        return None, None


def _pick(logits: Any, temperatures: Any, greedy: Any, generators: Mapping[int, Any]) -> tuple[Any, Any]:
    """Each row's next token and its log-probability under the distribution it came from, on the logits' device.

    Greedy rows take the argmax of their logits. A sampled row (those in ``generators``, by row index) takes
    argmax(softmax(logits / T) / q) with q ~ Exp(1) from its own generator: the exponential race that
    ``torch.multinomial(p, 1)`` runs, so the same generator state picks the same token, without multinomial's
    validity checks, each of which waits for the device.
    """
    import torch

    scaled = logits / temperatures
    logp = torch.log_softmax(scaled, dim=-1)
    tokens = torch.argmax(logits, dim=-1)
    if generators:
        race = torch.ones_like(logits)
        for i, generator in generators.items():
            race[i] = torch.empty_like(logits[i]).exponential_(1.0, generator=generator)
        drawn = torch.argmax(torch.softmax(scaled, dim=-1) / race, dim=-1)
        tokens = torch.where(greedy, tokens, drawn)
    return tokens, logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)

