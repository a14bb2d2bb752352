"""The live task generator's core: prompt the simulator model, parse and validate every generation.

Pure with respect to storage (the route stores). Every way a generation can fail becomes a rejected task with a
reason — a model that writes garbage is data for the curriculum, never a server error.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from genenv.contracts.tasks import GeneratedTask, GenerateRequest, RejectionReason, Seed, TaskStatus
from genenv.curriculum.repeats import is_repeat, repeat_key
from genenv.domains.base import Domain, TaskRejected
from genenv.inference.base import Completion, InferenceBackend, InferenceError, SamplingParams

MAX_JSON_STARTS = 64
"""How many '{' positions the extractor tries (bounds the work on adversarial output)."""

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def extract_json(text: str, finish_reason: str | None = None) -> dict[str, Any]:
    """The JSON object in a reply (whole text, fenced block, or first decodable ``{...}``), else TaskRejected."""
    # Reasons: EMPTY, TOO_LONG (cut off at max_tokens), NOT_JSON, SCHEMA (valid JSON but not an object).
    stripped = text.strip()
    if not stripped:
        raise TaskRejected(RejectionReason.EMPTY, "the simulator returned no text")
    for candidate in (stripped, *(m.group(1).strip() for m in _FENCE.finditer(stripped))):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if not isinstance(value, dict):
            raise TaskRejected(RejectionReason.SCHEMA, f"expected a JSON object, got {type(value).__name__}")
        return value
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"\{", stripped)][:MAX_JSON_STARTS]
    for start in starts:
        try:
            value, _end = decoder.raw_decode(stripped, start)
        except ValueError:
            if finish_reason == "length":
                # A reply cut off inside an object: what decodes after this '{' is a fragment of the task
                # (e.g. one function doc of a BFCL task), not the task.
                break
            continue
        if isinstance(value, dict):
            return value
    if finish_reason == "length":
        raise TaskRejected(RejectionReason.TOO_LONG, "output cut off at max_tokens before a JSON object closed")
    raise TaskRejected(RejectionReason.NOT_JSON, f"no JSON object in {stripped[:120]!r}")


def payload_key(payload: Mapping[str, Any]) -> str:
    """Canonical form used to spot duplicate tasks."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


def _rejected(base: dict[str, Any], reason: RejectionReason, detail: str) -> GeneratedTask:
    return GeneratedTask(**base, status=TaskStatus.REJECTED, rejection_reason=reason, rejection_detail=detail[:2000])


async def _generate_seed(
    backend: InferenceBackend,
    domain: Domain,
    request: GenerateRequest,
    seed: Seed | None,
    variations: list[int],
    schema: dict[str, Any] | None,
) -> list[GeneratedTask]:
    """The missing variations of one seed: they share their prompt, so they are one request with n samples."""
    stats = request.seed_stats.get(seed.id) if seed is not None else None
    messages = domain.simulator_messages(
        seed, request.n, target_success=request.target_success, stats=(stats.k, stats.n) if stats else None
    )
    bases: list[dict[str, Any]] = [
        {
            "seed_id": seed.id if seed is not None else None,
            "domain": domain.name,
            "variation": variation,
            "prompt_messages": messages,
            "generator_adapter": request.adapter,
        }
        for variation in variations
    ]
    try:
        completions: list[Completion] = await backend.chat_many(
            messages,
            len(variations),
            sampling=SamplingParams(temperature=request.temperature, max_tokens=request.max_tokens, json_schema=schema),
            adapter=request.adapter,
        )
    except InferenceError as exc:
        return [_rejected(base, RejectionReason.GENERATION_ERROR, str(exc)) for base in bases]
    return [_task(domain, seed, base, c) for base, c in zip(bases, completions, strict=True)]


def _task(domain: Domain, seed: Seed | None, base: dict[str, Any], completion: Completion) -> GeneratedTask:
    """One sample checked by the domain: a valid task or a rejection with its reason."""
    base = {
        **base,
        "raw_text": completion.text,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
    }
    try:
        obj = extract_json(completion.text, completion.finish_reason)
        # reject_if_seed again here: a plug-in family that forgot it still never returns its seed as a variation.
        payload = domain.reject_if_seed(domain.validate_generation(obj, seed), seed)
    except TaskRejected as rej:
        return _rejected(base, rej.reason, rej.detail)
    except Exception as exc:  # a validator bug on odd input is still this generation's rejection, not a 500
        return _rejected(base, RejectionReason.INVALID_TASK, f"validator failed: {exc!r}")
    return GeneratedTask(**base, payload=payload, status=TaskStatus.VALID)


async def generate_tasks(
    backend: InferenceBackend,
    domain: Domain,
    request: GenerateRequest,
    seeds: Sequence[Seed | None],
    *,
    guided: bool,
    skip: Collection[tuple[str | None, int]] = (),
    known: Mapping[str | None, Collection[str]] | None = None,
    earlier: Collection[str] = (),
) -> list[GeneratedTask]:
    """n variations per seed (``None`` = seedless), all requests in flight at once (the backend bounds them)."""
    # skip: (seed id, variation) pairs that exist already. known: payload keys accepted per seed, so a new
    # generation equal to one of them (or to an earlier variation) is a DUPLICATE, as is a copy of the seed itself
    # (rejected in _task: a variation is never its seed). earlier: repeat keys of the run's valid tasks of earlier
    # epochs, given only with simulator.reject_repeats; a generation repeating one is rejected as a REPEAT.
    schema = domain.task_json_schema() if guided else None
    jobs = [
        (seed, missing)
        for seed in seeds
        if (missing := [v for v in range(request.n) if (seed.id if seed is not None else None, v) not in skip])
    ]
    per_seed = await asyncio.gather(*(_generate_seed(backend, domain, request, s, v, schema) for s, v in jobs))
    results = [task for tasks in per_seed for task in tasks]
    seen: dict[str | None, set[str]] = {k: set(v) for k, v in (known or {}).items()}
    out: list[GeneratedTask] = []
    for task in results:
        if earlier and task.status is TaskStatus.VALID and task.payload is not None and is_repeat(
                domain.canonical_task(task.payload), earlier):
            task = task.model_copy(update={
                "status": TaskStatus.REJECTED, "payload": None, "rejection_reason": RejectionReason.REPEAT,
                "rejection_detail": "repeats a valid task of an earlier epoch of this run (simulator.reject_repeats)",
            })
        if task.status is TaskStatus.VALID and task.payload is not None:
            key = payload_key(task.payload)
            same_seed = seen.setdefault(task.seed_id, set())
            if key in same_seed:
                task = task.model_copy(
                    update={
                        "status": TaskStatus.REJECTED,
                        "payload": None,
                        "rejection_reason": RejectionReason.DUPLICATE,
                        "rejection_detail": "same task as another variation of this seed",
                    }
                )
            else:
                same_seed.add(key)
        out.append(task)
    return out


def earlier_keys(domain: Domain, payloads: Sequence[Mapping[str, Any]]) -> set[str]:
    """Repeat keys (genenv.curriculum.repeats) of earlier valid tasks, for ``generate_tasks(earlier=...)``."""
    return {repeat_key(domain.canonical_task(dict(p))) for p in payloads}


def rejection_counts(tasks: Sequence[GeneratedTask]) -> dict[str, int]:
    """Count per rejection reason; every reason is listed (0 when it did not occur)."""
    counts = {reason.value: 0 for reason in RejectionReason}
    for t in tasks:
        if t.rejection_reason is not None:
            counts[t.rejection_reason.value] += 1
    return counts
