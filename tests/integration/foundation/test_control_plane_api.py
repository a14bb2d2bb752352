"""Every control-plane endpoint through the app (in-process ASGI), on real SQLite and real Postgres."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fnd_helpers import Api, run_status, seed_run_data
from sqlalchemy import event

from genenv.contracts.runs import RunStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.settings import GenEnvSettings


def _error(resp: httpx.Response, status: int, type_: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == type_
    return dict(body["error"])


async def _create(api: Api, **config: Any) -> dict[str, Any]:
    resp = await api.client.post("/v1/runs", json={"config": config})
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


async def test_create_show_and_list(api: Api) -> None:
    run = await _create(api, name="api", rollouts_per_task=4, curriculum={"alpha": 0.4})
    assert run["status"] == "created" and run["name"] == "api" and len(run["id"]) == 32
    assert run["config"]["rollouts_per_task"] == 4 and run["config"]["curriculum"]["alpha"] == 0.4
    assert run["config"]["lora"]["rank"] == 16  # defaults filled in
    assert run["created_at"].endswith(("+00:00", "Z"))
    shown = await api.client.get(f"/v1/runs/{run['id']}")
    assert shown.json() == run
    listed = await api.client.get("/v1/runs", params={"status": "created", "limit": 500})
    assert run["id"] in {r["id"] for r in listed.json()["items"]}
    assert (await api.client.post("/v1/runs", json={})).status_code == 201  # every field has a default


@pytest.mark.parametrize(
    ("config", "param", "needle"),
    [
        ({"curriculum": {"alpha": 1.5}}, "config.curriculum.alpha", "less than 1"),
        ({"curriculum": {"beta": 0}}, "config.curriculum.beta", "greater than 0"),
        ({"rollouts_per_task": 1}, "config.rollouts_per_task", "greater than or equal to 2"),
        ({"agent": {"batch_size": 2, "micro_batch_size": 4}}, "config", "lower micro_batch_size or raise batch_size"),
        ({"alpah": 0.5}, "config.alpah", "Extra inputs are not permitted"),
        ({"mode": "bogus"}, "config.mode", "genenv"),
    ],
)
async def test_bad_config_is_422_with_field_path(api: Api, config: dict[str, Any], param: str, needle: str) -> None:
    err = _error(await api.client.post("/v1/runs", json={"config": config}), 422, "invalid_request_error")
    assert err["param"] == param and needle in err["message"] and err["code"] == "validation_error"


async def test_malformed_bodies(api: Api) -> None:
    resp = await api.client.post("/v1/runs", content=b"{oops", headers={"Content-Type": "application/json"})
    _error(resp, 422, "invalid_request_error")
    _error(await api.client.post("/v1/runs", json={"config": {}, "extra": 1}), 422, "invalid_request_error")
    err = _error(await api.client.post("/v1/runs", json={"config": {"name": "a\u0000b"}}), 400, "invalid_request_error")
    assert "NUL" in err["message"]


async def test_auth(api: Api) -> None:
    async with httpx.AsyncClient(transport=api.transport, base_url="http://cp") as anonymous:
        _error(await anonymous.get("/v1/runs"), 401, "authentication_error")
        _error(await anonymous.post("/v1/runs", json={}), 401, "authentication_error")
        _error(await anonymous.get("/v1/runs", headers={"Authorization": "Token x"}), 401, "authentication_error")
        _error(await anonymous.get("/v1/runs", headers={"Authorization": "Bearer wrong"}), 403, "permission_error")
        assert (await anonymous.get("/healthz")).status_code == 200
        assert (await anonymous.get("/readyz")).json() == {"status": "ready", "checks": {"database": "ok"}}


async def test_unknown_run_is_404_everywhere(api: Api) -> None:
    for path in ["", "/epochs", "/tasks", "/rollouts", "/stats", "/adapters", "/evaluations"]:
        err = _error(await api.client.get(f"/v1/runs/nope{path}"), 404, "not_found_error")
        assert err["code"] == "run_not_found"
    for action in ["start", "pause", "resume", "cancel"]:
        _error(await api.client.post(f"/v1/runs/nope/{action}"), 404, "not_found_error")
    _error(await api.client.get("/v1/nothing"), 404, "not_found_error")


async def test_lifecycle_and_enqueue_after_commit(api: Api, db_url: str) -> None:
    run_id = (await _create(api))["id"]
    assert (await api.client.post(f"/v1/runs/{run_id}/start")).json()["status"] == "running"
    # The enqueuer ran on its own connection and already saw 'running': the message left after the commit.
    assert api.enqueuer.calls == [(run_id, "running")]
    err = _error(await api.client.post(f"/v1/runs/{run_id}/start"), 409, "conflict_error")
    assert err["code"] == "illegal_transition" and "start is allowed only from: created" in err["message"]
    _error(await api.client.post(f"/v1/runs/{run_id}/resume"), 409, "conflict_error")
    assert (await api.client.post(f"/v1/runs/{run_id}/pause")).json()["status"] == "paused"
    assert len(api.enqueuer.calls) == 1  # pausing enqueues nothing
    assert (await api.client.post(f"/v1/runs/{run_id}/resume")).json()["status"] == "running"
    assert api.enqueuer.calls[-1] == (run_id, "running")
    assert (await api.client.post(f"/v1/runs/{run_id}/cancel")).json()["status"] == "cancelled"
    for action in ["start", "pause", "resume", "cancel"]:
        _error(await api.client.post(f"/v1/runs/{run_id}/{action}"), 409, "conflict_error")
    assert run_status(db_url, run_id) is RunStatus.CANCELLED
    assert len(api.enqueuer.calls) == 2


async def test_failed_commit_enqueues_nothing(api: Api, db_url: str) -> None:
    run_id = (await _create(api))["id"]
    sessions = api.app.state.control_plane.db.sessions

    def fail_commit(_session: object) -> None:
        raise RuntimeError("simulated commit failure")

    event.listen(sessions, "before_commit", fail_commit)
    try:
        resp = await api.client.post(f"/v1/runs/{run_id}/start")
    finally:
        event.remove(sessions, "before_commit", fail_commit)
    err = _error(resp, 500, "server_error")
    assert "simulated" not in err["message"]
    assert api.enqueuer.calls == []
    assert run_status(db_url, run_id) is RunStatus.CREATED


async def test_body_limit_is_413(api: Api) -> None:
    big = b'{"config": {"name": "' + b"x" * (70 * 1024) + b'"}}'
    resp = await api.client.post("/v1/runs", content=big, headers={"Content-Type": "application/json"})
    _error(resp, 413, "request_too_large_error")


async def test_run_pagination(api: Api) -> None:
    mine = [(await _create(api, name=f"p{i}"))["id"] for i in range(5)]
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = (await api.client.get("/v1/runs", params=params)).json()
        assert len(page["items"]) <= 2
        seen += [r["id"] for r in page["items"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    assert len(seen) == len(set(seen)) and [i for i in seen if i in mine] == mine[::-1]
    err = _error(await api.client.get("/v1/runs", params={"cursor": "bm9wZQ"}), 400, "invalid_request_error")
    assert err["param"] == "cursor" and err["code"] == "invalid_cursor"
    for bad in ({"limit": 0}, {"limit": 501}, {"status": "sleeping"}):
        err = _error(await api.client.get("/v1/runs", params=bad), 422, "invalid_request_error")
        assert err["param"] == f"query.{next(iter(bad))}"


async def test_inspection_endpoints(api: Api, db_url: str) -> None:
    run_id = (await _create(api))["id"]
    engine = make_engine(GenEnvSettings(database={"url": db_url}).database)
    try:
        with session_scope(make_session_factory(engine)) as s:
            from genenv.db.repositories import epochs

            epochs.upsert(s, run_id, 0)
            epochs.upsert(s, run_id, 1)
            ids = seed_run_data(s, run_id)
    finally:
        engine.dispose()

    async def items(path: str, **params: Any) -> list[dict[str, Any]]:
        resp = await api.client.get(f"/v1/runs/{run_id}/{path}", params={"limit": 500, **params})
        assert resp.status_code == 200, resp.text
        return list(resp.json()["items"])

    assert [e["index"] for e in await items("epochs")] == [0, 1]
    assert [t["id"] for t in await items("tasks")] == ids["tasks"]
    assert len(await items("tasks", epoch=0, seed_id="s1", status="valid", domain="arithmetic")) == 2
    assert len(await items("tasks", status="rejected")) == 2
    assert [r["id"] for r in await items("rollouts")] == ids["rollouts"]
    assert len(await items("rollouts", task_id=ids["tasks"][0])) == 2
    assert len(await items("rollouts", epoch=1)) == 6
    assert {s["kind"] for s in await items("stats")} == {"seed"}
    assert len(await items("stats", kind="task")) == 6
    assert len(await items("stats", kind="curriculum", epoch=0)) == 2
    assert [a["version"] for a in await items("adapters", role="simulator")] == [1, 2]
    assert [e["benchmark"] for e in await items("evaluations", epoch=1)] == ["bfcl", "api_bank"]
    assert len(await items("evaluations", benchmark="bfcl")) == 2

    # Walk the tasks two at a time: every task exactly once, in order.
    walked: list[int] = []
    params: dict[str, Any] = {"limit": 2}
    while True:
        page = (await api.client.get(f"/v1/runs/{run_id}/tasks", params=params)).json()
        walked += [t["id"] for t in page["items"]]
        if not page["next_cursor"]:
            break
        params["cursor"] = page["next_cursor"]
    assert walked == ids["tasks"]
    _error(await api.client.get(f"/v1/runs/{run_id}/tasks", params={"epoch": -1}), 422, "invalid_request_error")
    _error(await api.client.get(f"/v1/runs/{run_id}/stats", params={"kind": "x"}), 422, "invalid_request_error")


async def test_rollouts_carry_their_verdicts(api: Api, db_url: str) -> None:
    """Each rollout comes with its stored verdict (valid, form error, invalid) or null before the verify phase."""
    from genenv.db.models import RolloutRow, TaskRow, VerdictRow

    run_id = (await _create(api))["id"]
    engine = make_engine(GenEnvSettings(database={"url": db_url}).database)
    try:
        with session_scope(make_session_factory(engine)) as s:
            task = TaskRow(run_id=run_id, epoch=0, seed_id="s", domain="arithmetic", variation=0, status="valid",
                           payload={"expression": "1 + 2"})
            s.add(task)
            s.flush()
            task_id = task.id
            rollouts = [RolloutRow(task_id=task_id, attempt=a, response=r) for a, r in enumerate(["3", "x", None, "4"])]
            s.add_all(rollouts)
            s.flush()
            s.add_all([
                VerdictRow(rollout_id=rollouts[0].id, valid=True, score=1.0, success=True, details={"got": 3}),
                VerdictRow(rollout_id=rollouts[1].id, valid=True, score=0.0, success=False, error_kind="parse_error",
                           error_message="no integer in the reply"),
                VerdictRow(rollout_id=rollouts[2].id, valid=False, score=None, success=False,
                           error_kind="rollout_error", error_message="timed out"),
            ])
    finally:
        engine.dispose()

    resp = await api.client.get(f"/v1/runs/{run_id}/rollouts", params={"task_id": task_id})
    assert resp.status_code == 200, resp.text
    verdicts = [r["verdict"] for r in resp.json()["items"]]
    assert verdicts == [
        {"valid": True, "score": 1.0, "success": True, "error": None, "details": {"got": 3}, "form_error": None},
        {"valid": True, "score": 0.0, "success": False, "error": None, "details": {},
         "form_error": {"kind": "parse_error", "message": "no integer in the reply"}},
        {"valid": False, "score": None, "success": False, "error": {"kind": "rollout_error", "message": "timed out"},
         "details": {}, "form_error": None},
        None,
    ]


async def test_request_id_and_metrics(api: Api) -> None:
    resp = await api.client.get("/v1/runs", headers={"X-Request-Id": "trace-1"})
    assert resp.headers["x-request-id"] == "trace-1"
    await api.client.get("/v1/runs/nope")
    text = (await api.client.get("/metrics")).text
    assert 'genenv_http_requests_total{method="GET",route="/v1/runs/{run_id}",status="404"}' in text
    assert 'route="/v1/runs",status="200"' in text


def test_openapi_lists_every_operation(api: Api) -> None:
    schema = api.app.openapi()
    ops = {(m.upper(), p) for p, item in schema["paths"].items() for m in item}
    expected = {("POST", "/v1/runs"), ("GET", "/v1/runs"), ("GET", "/v1/runs/{run_id}")}
    expected |= {("POST", f"/v1/runs/{{run_id}}/{a}") for a in ("start", "pause", "resume", "cancel")}
    expected |= {("GET", f"/v1/runs/{{run_id}}/{r}") for r in ("epochs", "tasks", "rollouts", "stats", "adapters",
                                                                 "evaluations")}
    assert expected <= ops
    create = schema["paths"]["/v1/runs"]["post"]["responses"]
    assert create["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorEnvelope")
