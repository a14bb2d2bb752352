"""The simulator service on malformed model output (a scripted simulator backend): every rejection reason is
reported and counted, never a 500; with a run, rejected generations are stored as 'rejected' rows only and get
no rollouts (the tiny real model plays the agent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from genenv.clients.base import ApiError
from genenv.clients.simulator import SimulatorClient
from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import ChatMessage, GenerateRequest, InlineSeed, RejectionReason, TaskStatus
from genenv.db.engine import session_scope
from genenv.db.models import RolloutRow, TaskRow
from genenv.db.repositories import runs as run_repo
from genenv.inference.base import GREEDY, Completion, InferenceError
from genenv.inference.local import LocalBackend
from genenv.settings import GenEnvSettings
from genenv_rollout.worker import rollout_epoch
from genenv_simulator.app import create_app
from genenv_simulator.generation import extract_json

# Seed expression (appears in the simulator prompt) -> what the scripted simulator replies, per call.
SCRIPT: dict[str, list[Any]] = {
    "1 + 1": ["I would write 3 + 4."],  # not_json
    "1 + 2": ['{"question": "3 + 4"}'],  # schema_error
    "1 + 3": ["[1, 2, 3]"],  # schema_error (JSON, not an object)
    "1 + 4": ['{"expression": "2 ** 64"}'],  # invalid_task
    "1 + 5": ['{"expression": "__import__(\'os\')"}'],  # invalid_task
    "1 + 6": ['{"expression": "5 + 5"}', '{"expression": "5+5"}'],  # valid, then duplicate
    "1 + 7": [('{"expression": "1 + 2 + 3 + ', "length")],  # too_long
    "1 + 8": ["   "],  # empty
    "1 + 9": [InferenceError("HTTP 500: engine dead")],  # generation_error
    "2 + 1": ['Sure! ```json\n{"expression": "12 + 30"}\n```', 'Here: {"expression": "7 * 8"} done'],  # 2 valid
}
EXPECTED_COUNTS = {
    "not_json": 1,
    "schema_error": 2,
    "invalid_task": 2,
    "duplicate": 1,
    "too_long": 1,
    "empty": 1,
    "generation_error": 1,
}


class ScriptedSimulator:
    """Implements InferenceBackend; answers from SCRIPT by the seed expression found in the prompt."""

    def __init__(self) -> None:
        self.calls = 0
        self.schemas: list[dict[str, Any] | None] = []
        self._next: dict[str, int] = {}

    async def chat(self, messages: list[ChatMessage], **kw: Any) -> Completion:
        self.calls += 1
        self.schemas.append(kw.get("sampling", GREEDY).json_schema)
        prompt = messages[-1]["content"]
        key = next(k for k in SCRIPT if json.dumps({"expression": k}) in prompt)
        i = self._next.get(key, 0)
        self._next[key] = i + 1
        out = SCRIPT[key][min(i, len(SCRIPT[key]) - 1)]
        if isinstance(out, Exception):
            raise out
        text, finish = out if isinstance(out, tuple) else (out, "stop")
        return Completion(text=text, prompt_tokens=50, completion_tokens=len(text.split()), finish_reason=finish)

    async def chat_many(self, messages: list[ChatMessage], n: int, **kw: Any) -> list[Completion]:
        """n scripted samples in one request, which fails as a whole when any sample fails (as a server's does)."""
        results: list[Completion | BaseException] = []
        for _ in range(n):
            try:
                results.append(await self.chat(messages, **kw))
            except InferenceError as exc:
                results.append(exc)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return [r for r in results if isinstance(r, Completion)]

    async def complete(self, prompt: str, **kw: Any) -> Completion:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


def _request(**kw: Any) -> GenerateRequest:
    seeds = [InlineSeed(id=f"s-{expr}", payload={"expression": expr}) for expr in SCRIPT]
    return GenerateRequest(domain="arithmetic", seeds=seeds, n=2, target_success=0.5, **kw)


def _client(sim: ScriptedSimulator, sessions: sessionmaker[Session] | None = None) -> SimulatorClient:
    # Standalone use touches no database; an in-memory URL keeps the default file out of the home folder.
    settings = GenEnvSettings.model_validate({"database": {"url": "sqlite:///:memory:"}})
    app = create_app(settings, backend=sim, sessions=sessions)
    return SimulatorClient("http://simulator", transport=httpx.ASGITransport(app=app))


@pytest.mark.parametrize(
    ("text", "finish", "reason"),
    [
        ("", "stop", RejectionReason.EMPTY),
        ("no json here", "stop", RejectionReason.NOT_JSON),
        ('{"a": ', "length", RejectionReason.TOO_LONG),
        # Cut off inside the task: the complete inner object is a fragment, not the task (seen with Qwen on BFCL).
        ('{"question": "q", "functions": [{"name": "f", "parameters": {"type": "dict"}}, {"na', "length",
         RejectionReason.TOO_LONG),
        ('"just a string"', "stop", RejectionReason.SCHEMA),
        ("{not: json}", "stop", RejectionReason.NOT_JSON),
    ],
)
def test_extract_json_rejections(text: str, finish: str, reason: RejectionReason) -> None:
    from genenv.domains.base import TaskRejected

    with pytest.raises(TaskRejected) as info:
        extract_json(text, finish)
    assert info.value.reason is reason


@pytest.mark.parametrize(
    "text",
    [
        '{"expression": "1 + 2"}',
        '```json\n{"expression": "1 + 2"}\n```',
        'Here you go: {"expression": "1 + 2"} — enjoy {',
        '{ broken { "x" } then {"expression": "1 + 2"}',
    ],
)
def test_extract_json_finds_the_object(text: str) -> None:
    assert extract_json(text, "stop") == {"expression": "1 + 2"}


def test_a_whole_object_before_the_cut_is_kept() -> None:
    assert extract_json('Sure: {"expression": "1 + 2"} and then some text that ran o', "length") == {
        "expression": "1 + 2"
    }


async def test_every_rejection_reason_is_reported_and_counted(tmp_path: Path) -> None:
    sim = ScriptedSimulator()
    # One generation per seed except where SCRIPT scripts two variations.
    client = _client(sim)
    resp = await client.generate(_request())
    await client.aclose()
    assert sim.calls == 2 * len(SCRIPT)
    assert all(s is not None and s["required"] == ["expression"] for s in sim.schemas)  # guided decoding asked for
    reasons = {t.rejection_reason for t in resp.rejected}
    # Every reason occurs in this script (repeats need a run with simulator.reject_repeats: tested below) …
    assert reasons == set(RejectionReason) - {RejectionReason.REPEAT}
    for reason, count in EXPECTED_COUNTS.items():  # … and is counted (each seed runs twice: n=2)
        assert resp.rejection_counts[reason] == 2 * count - (1 if reason == "duplicate" else 0), reason
    assert sum(resp.rejection_counts.values()) == len(resp.rejected)
    accepted = sorted(t.payload["expression"] for t in resp.accepted if t.payload)
    assert accepted == ["12 + 30", "5 + 5", "7 * 8"]
    for t in resp.rejected:
        assert t.status is TaskStatus.REJECTED and t.payload is None and t.rejection_detail
        assert t.prompt_messages  # the conditioning prompt is kept for the simulator update
    dup = next(t for t in resp.rejected if t.rejection_reason is RejectionReason.DUPLICATE)
    assert dup.seed_id == "s-1 + 6" and dup.raw_text == '{"expression": "5+5"}'


async def test_request_errors_use_the_envelope(sqlite_sessions: sessionmaker[Session]) -> None:
    client = _client(ScriptedSimulator(), sqlite_sessions)
    with pytest.raises(ApiError) as unknown_domain:
        await client.generate(GenerateRequest(domain="chess"))
    with pytest.raises(ApiError) as eval_seed:
        await client.generate(GenerateRequest(domain="arithmetic", seed_ids=["arith-1d-add-0001"]))  # an eval item
    with pytest.raises(ApiError) as half_run:
        await client.generate(GenerateRequest(domain="arithmetic", run_id="r1"))
    with pytest.raises(ApiError) as no_run:
        await client.generate(GenerateRequest(domain="arithmetic", run_id="missing", epoch=0))
    await client.aclose()
    # 404 as on the control plane (a run config naming no domain): the name addresses nothing that exists.
    assert (unknown_domain.value.status_code, unknown_domain.value.param) == (404, "domain")
    assert (unknown_domain.value.type, unknown_domain.value.code) == ("not_found_error", "unknown_domain")
    assert (eval_seed.value.status_code, eval_seed.value.param) == (404, "seed_ids")
    assert (half_run.value.status_code, half_run.value.param) == (400, "run_id")
    assert (no_run.value.status_code, no_run.value.param) == (404, "run_id")


async def test_train_seed_ids_and_seedless_generation() -> None:
    sim = ScriptedSimulator()
    SCRIPT["7 + 8"] = ['{"expression": "17 + 8"}']
    try:
        client = _client(sim)
        by_id = await client.generate(GenerateRequest(domain="arithmetic", seed_ids=["arith-1d-add-0000"], n=1))
        await client.aclose()
    finally:
        del SCRIPT["7 + 8"]
    assert [t.payload for t in by_id.accepted] == [
        {"expression": "17 + 8", "answer": 25, "operators": 1, "max_digits": 2}
    ]
    assert by_id.accepted[0].seed_id == "arith-1d-add-0000"


async def test_run_storage_is_idempotent_and_rejected_tasks_get_no_rollouts(
    sqlite_sessions: sessionmaker[Session], tiny_model_dir: Path
) -> None:
    """Choice documented in the service: rejected generations ARE stored, as status 'rejected' with the reason
    (the epoch summary counts them, the simulator update sees them); they never become valid tasks and the
    rollout worker never attempts them."""
    with session_scope(sqlite_sessions) as s:
        run_id = run_repo.create(s, RunConfig(rollouts_per_task=2, max_response_tokens=4)).id
    sim = ScriptedSimulator()
    client = _client(sim, sqlite_sessions)
    first = await client.generate(_request(run_id=run_id, epoch=0))
    calls = sim.calls
    second = await client.generate(_request(run_id=run_id, epoch=0))
    await client.aclose()
    # Everything was stored except the two failed requests (an outage is not the model's output): only those two
    # variations are generated again.
    assert sim.calls == calls + 2

    def key(resp: Any) -> set[tuple[Any, ...]]:
        return {
            (t.seed_id, t.variation, t.status, json.dumps(t.payload), t.rejection_reason, t.raw_text)
            for t in resp.accepted + resp.rejected
        }

    assert key(second) == key(first)  # the stored tasks come back exactly as first generated
    assert sorted(t.payload["expression"] for t in second.accepted if t.payload) == ["12 + 30", "5 + 5", "7 * 8"]
    assert second.rejection_counts == first.rejection_counts
    with session_scope(sqlite_sessions) as s:
        rows = list(s.scalars(select(TaskRow).where(TaskRow.run_id == run_id)))
        assert len(rows) == 2 * len(SCRIPT) - 2
        valid = [r for r in rows if r.status == TaskStatus.VALID.value]
        rejected = [r for r in rows if r.status == TaskStatus.REJECTED.value]
        assert len(valid) == 3 and all(r.payload and r.rejection_reason is None for r in valid)
        stored_reasons = {r.rejection_reason for r in rejected}
        assert stored_reasons == {reason.value for reason in RejectionReason} - {"generation_error", "repeat"}
        assert all(r.payload is None for r in rejected)
        rejected_ids = {r.id for r in rejected}
    agent = LocalBackend(tiny_model_dir, dtype="float32", num_threads=1)
    try:
        result = await rollout_epoch(sqlite_sessions, agent, run_id, 0)
    finally:
        await agent.aclose()
    assert (result.tasks, result.created, result.errors) == (3, 6, 0)
    with session_scope(sqlite_sessions) as s:
        attempted = set(s.scalars(select(RolloutRow.task_id)))
        assert not attempted & rejected_ids
        assert s.scalar(select(func.count(RolloutRow.id))) == 6


@pytest.mark.parametrize("reject", [False, True])
async def test_a_run_can_reject_repeats_of_earlier_epochs(sqlite_sessions: sessionmaker[Session], reject: bool) -> None:
    with session_scope(sqlite_sessions) as s:
        run_id = run_repo.create(s, RunConfig.model_validate({"simulator": {"reject_repeats": reject}})).id
    client = _client(ScriptedSimulator(), sqlite_sessions)
    first = await client.generate(_request(run_id=run_id, epoch=0))
    await client.aclose()
    client = _client(ScriptedSimulator(), sqlite_sessions)  # the same script again: epoch 1 repeats epoch 0
    again = await client.generate(_request(run_id=run_id, epoch=1))
    await client.aclose()
    assert sorted(t.payload["expression"] for t in first.accepted if t.payload) == ["12 + 30", "5 + 5", "7 * 8"]
    assert first.rejection_counts["repeat"] == 0  # nothing earlier to repeat in epoch 0
    if not reject:  # off by default: the same tasks are accepted again
        assert RunConfig().simulator.reject_repeats is False
        assert sorted(t.payload["expression"] for t in again.accepted if t.payload) == ["12 + 30", "5 + 5", "7 * 8"]
        assert again.rejection_counts["repeat"] == 0
        return
    # "5 + 5", "5+5" (the same canonical form), "12 + 30" and "7 * 8" all restate epoch 0's valid tasks.
    assert again.accepted == [] and again.rejection_counts["repeat"] == 4
    assert again.rejection_counts["duplicate"] == 0  # a repeat is counted once, as a repeat
    rep = next(t for t in again.rejected if t.rejection_reason is RejectionReason.REPEAT)
    assert "earlier epoch" in (rep.rejection_detail or "") and rep.payload is None
    with session_scope(sqlite_sessions) as s:
        stored = set(s.scalars(select(TaskRow.rejection_reason).where(TaskRow.run_id == run_id, TaskRow.epoch == 1)))
    assert "repeat" in stored


class DownSimulator(ScriptedSimulator):
    """Every request fails the way an unreachable server does."""

    async def chat(self, messages: list[ChatMessage], **kw: Any) -> Completion:
        self.calls += 1
        raise InferenceError("cannot connect to http://vllm: ConnectError")


async def test_an_outage_is_a_503_and_stores_nothing(sqlite_sessions: sessionmaker[Session]) -> None:
    with session_scope(sqlite_sessions) as s:
        run_id = run_repo.create(s, RunConfig()).id
    sim = DownSimulator()
    client = _client(sim, sqlite_sessions)
    with pytest.raises(ApiError) as info:
        await client.generate(_request(run_id=run_id, epoch=0))
    await client.aclose()
    assert info.value.status_code == 503 and info.value.code == "generation_failed"
    assert sim.calls == 2 * len(SCRIPT)
    with session_scope(sqlite_sessions) as s:
        assert s.scalar(select(func.count(TaskRow.id))) == 0


async def test_unknown_domain_without_a_database_is_404_not_500() -> None:
    """A standalone simulator on an empty database: a name that is no static domain is a 404 naming the setting."""
    client = _client(ScriptedSimulator())
    with pytest.raises(ApiError) as err:
        await client.generate(GenerateRequest(domain="my_tools"))
    await client.aclose()
    assert (err.value.status_code, err.value.param) == (404, "domain")
    assert "GENENV_DATABASE__URL" in err.value.message
