"""An outside agent's endpoints (issue 33): POST /v1/runs/{id}/leases and /attempts through the real app, with the
real in-process verifier scoring the replies, on SQLite and Postgres."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fnd_helpers import AUTH, Api, RecordingEnqueuer, app_settings, free_port
from sqlalchemy import func, select, update

from genenv.contracts.runs import RunStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import EpochRow, LeaseRow, RolloutRow, TaskRow, VerdictRow
from genenv.db.repositories import runs
from genenv.domains import get_domain
from genenv.settings import GenEnvSettings
from genenv_control_plane.app import create_app

G = 3  # rollouts_per_task
EXPRESSIONS = ["3 + 4", "2 * 5", "9 - 1"]


def _error(resp: httpx.Response, status: int, code: str, param: str | None = None) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    err = dict(resp.json()["error"])
    assert err["code"] == code, err
    if param is not None:
        assert err["param"] == param, err
    return err


def _sessions(db_url: str) -> Any:
    return make_session_factory(make_engine(GenEnvSettings(database={"url": db_url}).database))


async def _external_run(api: Api, db_url: str, *, phase: str = "rollout", status: RunStatus = RunStatus.RUNNING,
                        **config: Any) -> tuple[str, list[int]]:
    """An external_agent run at epoch 0 in ``phase`` with one valid arithmetic task per EXPRESSIONS (and one
    rejected generation, never leased)."""
    resp = await api.client.post("/v1/runs", json={"config": {"mode": "external_agent", "rollouts_per_task": G,
                                                              "epochs": 2, **config}})
    assert resp.status_code == 201, resp.text
    run_id = resp.json()["id"]
    domain = get_domain("arithmetic")
    sessions = _sessions(db_url)
    with session_scope(sessions) as s:
        if status is not RunStatus.CREATED:
            runs.move(s, runs.get(s, run_id), RunStatus.RUNNING)
            if status is not RunStatus.RUNNING:
                runs.move(s, runs.get(s, run_id), status)
        s.add(EpochRow(run_id=run_id, index=0, phase=phase, summary={}))
        tasks = [TaskRow(run_id=run_id, epoch=0, seed_id="s", domain="arithmetic", variation=i, status="valid",
                         payload=domain.validate_generation({"expression": e}, None), raw_text="{}",
                         prompt_messages=[]) for i, e in enumerate(EXPRESSIONS)]
        s.add_all(tasks)
        s.add(TaskRow(run_id=run_id, epoch=0, seed_id="s", domain="arithmetic", variation=9, status="rejected",
                      rejection_reason="not_json", raw_text="oops", prompt_messages=[]))
        s.flush()
        ids = [t.id for t in tasks]
    sessions.kw["bind"].dispose()
    return run_id, ids


def _past() -> datetime:
    return datetime.now(UTC) - timedelta(seconds=1)


def _answer(task_index: int) -> str:
    return str(eval(EXPRESSIONS[task_index]))  # the test's own constant expressions


def _count(db_url: str, model: Any, *where: Any) -> int:
    sessions = _sessions(db_url)
    try:
        with session_scope(sessions) as s:
            return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)
    finally:
        sessions.kw["bind"].dispose()


async def test_lease_then_report_replies_records_rollouts_with_the_checkers_verdicts(api: Api, db_url: str) -> None:
    run_id, ids = await _external_run(api, db_url)
    resp = await api.client.post(f"/v1/runs/{run_id}/leases", json={"limit": 2, "lease_s": 60})
    assert resp.status_code == 200, resp.text
    lease = resp.json()
    assert lease["epoch"] == 0 and lease["retry_after_s"] is None and lease["expires_at"].endswith(("Z", "+00:00"))
    assert [i["task_id"] for i in lease["items"]] == ids[:2]
    first = lease["items"][0]
    assert first == {"task_id": ids[0], "domain": "arithmetic", "attempts": G, "payload": None,
                     "messages": [{"role": "user", "content": "What is 3 + 4? Reply with the number only."}]}
    # Service-side scoring: no payload, no answer anywhere in the item.
    assert "7" not in str({k: v for k, v in first.items() if k not in ("task_id", "attempts")})

    report = {"lease_id": lease["lease_id"], "attempts": [
        {"task_id": ids[0], "reply": _answer(0)}, {"task_id": ids[0], "reply": "8"},
        {"task_id": ids[1], "reply": "ten"}]}
    resp = await api.client.post(f"/v1/runs/{run_id}/attempts", json=report)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["recorded"] == 3 and body["epoch"] == 0 and body["lease_open"] == 2 * G - 3
    got = [(v["task_id"], v["score"], v["valid"], v["success"], v["origin"]) for v in body["verdicts"]]
    assert got == [(ids[0], 1.0, True, True, "client_reply"), (ids[0], 0.0, True, False, "client_reply"),
                   (ids[1], 0.0, True, False, "client_reply")]
    assert body["verdicts"][0]["reason"] is None and body["verdicts"][2]["reason"].startswith("parse_error")
    # Stored as rollouts with their verdicts (what VERIFY, SCORE and the summary read), numbered per task.
    sessions = _sessions(db_url)
    with session_scope(sessions) as s:
        rows = s.execute(select(RolloutRow.task_id, RolloutRow.attempt, RolloutRow.origin, RolloutRow.response,
                                VerdictRow.score).join(VerdictRow, VerdictRow.rollout_id == RolloutRow.id)
                         .order_by(RolloutRow.id)).all()
    sessions.kw["bind"].dispose()
    assert [tuple(r) for r in rows] == [(ids[0], 0, "client_reply", "7", 1.0), (ids[0], 1, "client_reply", "8", 0.0),
                                        (ids[1], 0, "client_reply", "ten", 0.0)]
    # The run's rollouts endpoint shows them with their origin.
    shown = (await api.client.get(f"/v1/runs/{run_id}/rollouts")).json()["items"]
    assert {r["origin"] for r in shown} == {"client_reply"} and len(shown) == 3

    # The leased attempts are not leased again; the third task is.
    again = (await api.client.post(f"/v1/runs/{run_id}/leases", json={"limit": 10})).json()
    assert [(i["task_id"], i["attempts"]) for i in again["items"]] == [(ids[2], G)]
    empty = (await api.client.post(f"/v1/runs/{run_id}/leases", json={})).json()
    assert empty["items"] == [] and empty["lease_id"] is None and 1.0 <= empty["retry_after_s"] <= 30.0


async def test_idempotency_key_gives_the_same_answer_and_records_once(api: Api, db_url: str) -> None:
    run_id, ids = await _external_run(api, db_url)
    lease = (await api.client.post(f"/v1/runs/{run_id}/leases", json={"limit": 1})).json()
    report = {"lease_id": lease["lease_id"], "attempts": [{"task_id": ids[0], "reply": "7"}]}
    key = {"Idempotency-Key": "report-0001"}
    first = await api.client.post(f"/v1/runs/{run_id}/attempts", json=report, headers=key)
    second = await api.client.post(f"/v1/runs/{run_id}/attempts", json=report, headers=key)
    assert first.status_code == second.status_code == 200 and first.json() == second.json()
    assert _count(db_url, RolloutRow, RolloutRow.task_id == ids[0]) == 1
    # The same key with another body is refused; a fresh key records a second attempt.
    other = {**report, "attempts": [{"task_id": ids[0], "reply": "6"}]}
    _error(await api.client.post(f"/v1/runs/{run_id}/attempts", json=other, headers=key), 422,
           "idempotency_key_reused", "Idempotency-Key")
    fresh = await api.client.post(f"/v1/runs/{run_id}/attempts", json=report, headers={"Idempotency-Key": "k2"})
    assert fresh.status_code == 200 and fresh.json()["lease_open"] == G - 2
    assert _count(db_url, RolloutRow, RolloutRow.task_id == ids[0]) == 2
    # After the lease expired, the first request repeated still gets its answer (nothing recorded).
    sessions = _sessions(db_url)
    with session_scope(sessions) as s:
        s.execute(update(LeaseRow).where(LeaseRow.run_id == run_id).values(expires_at=_past()))
    sessions.kw["bind"].dispose()
    late = await api.client.post(f"/v1/runs/{run_id}/attempts", json=report, headers=key)
    assert late.status_code == 200 and late.json() == first.json()
    assert _count(db_url, RolloutRow, RolloutRow.task_id == ids[0]) == 2


async def test_every_error_of_the_protocol(api: Api, db_url: str) -> None:
    run_id, ids = await _external_run(api, db_url)
    lease = (await api.client.post(f"/v1/runs/{run_id}/leases", json={"limit": 1})).json()
    lid = lease["lease_id"]
    post = api.client.post

    async def attempts(*items: dict[str, Any], lease_id: str = lid) -> httpx.Response:
        return await post(f"/v1/runs/{run_id}/attempts", json={"lease_id": lease_id, "attempts": list(items)})

    _error(await post("/v1/runs/nope/leases", json={}), 404, "run_not_found")
    _error(await post("/v1/runs/nope/attempts", json={"lease_id": lid, "attempts": [{"task_id": 1, "reply": "1"}]}),
           404, "run_not_found")
    _error(await attempts({"task_id": ids[0], "reply": "7"}, lease_id="nope"), 404, "unknown_lease", "lease_id")
    _error(await attempts({"task_id": ids[1], "reply": "7"}), 422, "task_not_leased", "attempts.0.task_id")
    _error(await attempts({"task_id": ids[0], "score": 1.0}), 422, "client_scoring_off", "attempts.0.score")
    too_many = [{"task_id": ids[0], "reply": "7"}] * (G + 1)
    _error(await attempts(*too_many), 409, "too_many_attempts", f"attempts.{G}.task_id")
    # Body checks (the contract): limits, exactly one of reply and score, a score within 0-1.
    for body, param in [({"limit": 0}, "limit"), ({"limit": 257}, "limit"), ({"lease_s": 9}, "lease_s"),
                        ({"lease_s": 3601}, "lease_s")]:
        _error(await post(f"/v1/runs/{run_id}/leases", json=body), 422, "validation_error", param)
    _error(await attempts({"task_id": ids[0]}), 422, "validation_error", "attempts.0")
    _error(await attempts({"task_id": ids[0], "reply": "7", "score": 1.0}), 422, "validation_error", "attempts.0")
    _error(await attempts({"task_id": ids[0], "score": 1.5}), 422, "validation_error", "attempts.0.score")
    _error(await attempts({"task_id": ids[0], "reply": "7\u0000"}), 422, "validation_error", "attempts.0.reply")
    _error(await post(f"/v1/runs/{run_id}/attempts", json={"lease_id": lid, "attempts": []}), 422, "validation_error",
           "attempts")
    assert _count(db_url, RolloutRow, RolloutRow.task_id.in_(ids)) == 0  # nothing of the refused reports was recorded
    # An expired lease: 409, and its tasks are leasable again.
    sessions = _sessions(db_url)
    with session_scope(sessions) as s:
        s.execute(update(LeaseRow).where(LeaseRow.id == lid).values(expires_at=_past()))
    sessions.kw["bind"].dispose()
    _error(await attempts({"task_id": ids[0], "reply": "7"}), 409, "lease_expired", "lease_id")
    back = (await post(f"/v1/runs/{run_id}/leases", json={"limit": 3})).json()
    assert [(i["task_id"], i["attempts"]) for i in back["items"]] == [(ids[0], G), (ids[1], G), (ids[2], G)]
    assert _count(db_url, LeaseRow, LeaseRow.id == lid, LeaseRow.state == "expired") == 1
    # The epoch moves past ROLLOUT: a reply for it is 409, leases are empty with a retry time.
    sessions = _sessions(db_url)
    with session_scope(sessions) as s:
        s.execute(update(EpochRow).where(EpochRow.run_id == run_id).values(phase="score"))
    sessions.kw["bind"].dispose()
    _error(await attempts({"task_id": ids[0], "reply": "7"}, lease_id=back["lease_id"]), 409, "epoch_closed",
           "lease_id")
    idle = (await post(f"/v1/runs/{run_id}/leases", json={})).json()
    assert idle["items"] == [] and idle["retry_after_s"] == 5.0 and idle["epoch"] == 0
    # Not running: 409 for both endpoints.
    sessions = _sessions(db_url)
    with session_scope(sessions) as s:
        runs.move(s, runs.get(s, run_id), RunStatus.PAUSED)
    sessions.kw["bind"].dispose()
    _error(await post(f"/v1/runs/{run_id}/leases", json={}), 409, "run_not_running", "run_id")
    _error(await attempts({"task_id": ids[0], "reply": "7"}, lease_id=back["lease_id"]), 409, "run_not_running")
    # A run whose agent is ours: 409.
    ours = (await post("/v1/runs", json={"config": {"mode": "genenv"}})).json()["id"]
    _error(await post(f"/v1/runs/{ours}/leases", json={}), 409, "not_external_agent", "run_id")


async def test_client_scoring_takes_scores_and_leases_carry_the_payload(api: Api, db_url: str) -> None:
    run_id, ids = await _external_run(api, db_url, external={"scoring": "client"},
                                      curriculum={"success_threshold": 0.5})
    lease = (await api.client.post(f"/v1/runs/{run_id}/leases", json={"limit": 1})).json()
    assert lease["items"][0]["payload"]["answer"] == 7
    resp = await api.client.post(f"/v1/runs/{run_id}/attempts", json={"lease_id": lease["lease_id"], "attempts": [
        {"task_id": ids[0], "score": 0.6}, {"task_id": ids[0], "score": 0.2}, {"task_id": ids[0], "reply": "7"}]})
    assert resp.status_code == 200, resp.text
    got = [(v["score"], v["success"], v["origin"]) for v in resp.json()["verdicts"]]
    assert got == [(0.6, True, "client_score"), (0.2, False, "client_score"), (1.0, True, "client_reply")]
    assert _count(db_url, RolloutRow, RolloutRow.origin == "client_score", RolloutRow.response.is_(None),
                  RolloutRow.task_id.in_(ids)) == 2


async def test_leases_wait_while_the_epoch_generates(api: Api, db_url: str) -> None:
    run_id, _ = await _external_run(api, db_url, phase="generate")
    idle = (await api.client.post(f"/v1/runs/{run_id}/leases", json={})).json()
    assert idle == {"lease_id": None, "expires_at": None, "epoch": 0, "items": [], "retry_after_s": 5.0}
    assert _count(db_url, LeaseRow, LeaseRow.run_id == run_id) == 0


@pytest.mark.parametrize(("config", "needle"), [
    ({"agent": {"learning_rate": 0.001}}, "config.agent.learning_rate"),
    ({"rollout_temperature": 1.0}, "config.rollout_temperature"),
    ({"eval_every": 1, "eval_benchmarks": ["arithmetic"]}, "config.eval_every, config.eval_benchmarks"),
    ({"curriculum": {"replay_ratio": 0.0}}, "config.curriculum.replay_ratio"),
])
async def test_agent_side_settings_are_refused_at_create(api: Api, config: dict[str, Any], needle: str) -> None:
    resp = await api.client.post("/v1/runs", json={"config": {"mode": "external_agent", **config}})
    err = _error(resp, 422, "validation_error", "config")
    assert needle in err["message"] and "cannot apply" in err["message"]
    resp = await api.client.post("/v1/runs", json={"config": {"mode": "genenv", "external": {"scoring": "client"}}})
    assert "config.external.scoring" in _error(resp, 422, "validation_error", "config")["message"]


async def test_concurrent_leases_and_retries_never_share_or_double_an_attempt(api: Api, db_url: str) -> None:
    """Requests in flight at once (each route runs its transaction in its own thread): leases never hold the same
    open attempt twice, and twin reports with one Idempotency-Key record once and get the same answer."""
    run_id, ids = await _external_run(api, db_url)
    leased = await asyncio.gather(*[api.client.post(f"/v1/runs/{run_id}/leases", json={"limit": 1})
                                    for _ in range(6)])
    assert all(r.status_code == 200 for r in leased), [r.text for r in leased]
    held = [(r.json()["lease_id"], i["task_id"], i["attempts"]) for r in leased for i in r.json()["items"]]
    assert sorted(t for _, t, _ in held) == ids and all(n == G for *_, n in held)  # each task once, in full
    lease_id, task_id, _ = held[0]
    report = {"lease_id": lease_id, "attempts": [{"task_id": task_id, "reply": "7"}] * G}
    twins = await asyncio.gather(*[api.client.post(f"/v1/runs/{run_id}/attempts", json=report,
                                                   headers={"Idempotency-Key": "twin"}) for _ in range(4)])
    assert all(r.status_code == 200 for r in twins), [r.text for r in twins]
    assert all(r.json() == twins[0].json() for r in twins) and twins[0].json()["recorded"] == G
    assert _count(db_url, RolloutRow, RolloutRow.task_id == task_id) == G


async def test_a_verifier_that_does_not_answer_records_nothing_and_the_retry_records_once(
    api: Api, db_url: str
) -> None:
    """The control plane scores replies through the verifier service: when it is away the report is a 503 and
    nothing is stored, so the client's retry with the same Idempotency-Key records the attempts exactly once."""
    run_id, ids = await _external_run(api, db_url)
    lease = (await api.client.post(f"/v1/runs/{run_id}/leases", json={"limit": 1})).json()
    report = {"lease_id": lease["lease_id"], "attempts": [{"task_id": ids[0], "reply": "7"}]}
    key = {"Idempotency-Key": "after-outage"}
    away = create_app(app_settings(db_url, services={"verifier": f"http://127.0.0.1:{free_port()}"}),
                      enqueuer=RecordingEnqueuer(db_url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=away), base_url="http://cp", headers=AUTH) as c:
        _error(await c.post(f"/v1/runs/{run_id}/attempts", json=report, headers=key), 503, "verifier_unavailable")
    away.state.control_plane.close()
    assert _count(db_url, RolloutRow, RolloutRow.task_id == ids[0]) == 0
    retried = await api.client.post(f"/v1/runs/{run_id}/attempts", json=report, headers=key)
    assert retried.status_code == 200 and retried.json()["recorded"] == 1
    assert _count(db_url, RolloutRow, RolloutRow.task_id == ids[0]) == 1
