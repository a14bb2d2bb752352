"""Distributed mode: starting a run puts a real Celery message on the Redis 'control' list, after the commit."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis
from fnd_helpers import AUTH, app_settings, run_status
from sqlalchemy import event

from genenv.contracts.runs import RunStatus
from genenv.queue import QUEUE_CONTROL, TASK_ADVANCE_RUN
from genenv_control_plane.app import create_app
from genenv_control_plane.enqueue import CeleryEnqueuer

pytestmark = [pytest.mark.redis, pytest.mark.postgres]


def _messages(redis_url: str) -> list[dict[str, Any]]:
    """Decoded kombu messages waiting on the control queue (kombu's Redis transport keeps a list per queue)."""
    client = redis.Redis.from_url(redis_url)
    try:
        raw = client.lrange(QUEUE_CONTROL, 0, -1)
    finally:
        client.close()
    out = []
    for item in raw:
        envelope = json.loads(item)
        body = envelope["body"]
        if envelope["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args, kwargs, _embed = json.loads(body)
        out.append({"task": envelope["headers"]["task"], "args": args, "kwargs": kwargs,
                    "content_type": envelope["content-type"]})
    return out


def _for(redis_url: str, run_id: str) -> list[dict[str, Any]]:
    return [m for m in _messages(redis_url) if run_id in m["args"]]


@pytest.fixture
async def distributed(new_pg_database: Any, redis_url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Any, str]]:
    """The control plane with queue.eager=false: a real Celery app on the session's Redis database."""
    from genenv.db.migrate import upgrade

    db_url = new_pg_database()
    upgrade(db_url)
    app = create_app(app_settings(db_url, queue={"eager": False}, redis={"url": redis_url}))
    assert isinstance(app.state.control_plane.enqueuer, CeleryEnqueuer)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cp", headers=AUTH) as c:
        yield c, app, db_url
    app.state.control_plane.close()


async def test_start_and_resume_publish_advance_run(distributed: Any, redis_url: str) -> None:
    client, _app, _db = distributed
    run_id = (await client.post("/v1/runs", json={})).json()["id"]
    assert _for(redis_url, run_id) == []  # creating enqueues nothing
    assert (await client.post(f"/v1/runs/{run_id}/start")).status_code == 200
    assert _for(redis_url, run_id) == [
        {"task": TASK_ADVANCE_RUN, "args": [run_id], "kwargs": {}, "content_type": "application/json"}
    ]
    await client.post(f"/v1/runs/{run_id}/pause")
    assert len(_for(redis_url, run_id)) == 1
    await client.post(f"/v1/runs/{run_id}/resume")
    assert len(_for(redis_url, run_id)) == 2
    ready = await client.get("/readyz")
    assert ready.json() == {"status": "ready", "checks": {"database": "ok", "redis": "ok"}}


async def test_failed_transaction_publishes_nothing(distributed: Any, redis_url: str) -> None:
    client, app, db_url = distributed
    run_id = (await client.post("/v1/runs", json={})).json()["id"]
    sessions = app.state.control_plane.db.sessions

    def fail_commit(_session: object) -> None:
        raise RuntimeError("simulated commit failure")

    event.listen(sessions, "before_commit", fail_commit)
    try:
        resp = await client.post(f"/v1/runs/{run_id}/start")
    finally:
        event.remove(sessions, "before_commit", fail_commit)
    assert resp.status_code == 500
    assert _for(redis_url, run_id) == []
    assert run_status(db_url, run_id) is RunStatus.CREATED


async def test_broker_down_is_503_and_readyz_says_so(new_pg_database: Any) -> None:
    from genenv.db.migrate import upgrade

    db_url = new_pg_database()
    upgrade(db_url)
    # Port 9 (discard) on loopback: nothing listens, connections are refused at once.
    settings = app_settings(db_url, queue={"eager": False}, redis={"url": "redis://127.0.0.1:9/0"})
    app = create_app(settings)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cp", headers=AUTH) as c:
            ready = await c.get("/readyz")
            assert ready.status_code == 503 and ready.json()["error"]["message"] == "not ready: redis (ConnectionError)"
            run_id = (await c.post("/v1/runs", json={})).json()["id"]
            started = time.monotonic()
            resp = await c.post(f"/v1/runs/{run_id}/start")
            elapsed = time.monotonic() - started
        assert elapsed < 5, "publishing must give up quickly when the broker is down"
        assert resp.status_code == 503 and resp.json()["error"]["code"] == "enqueue_failed"
    finally:
        app.state.control_plane.close()
