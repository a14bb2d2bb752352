"""The control plane's read path (issue 14, item 12): what a page costs, and that the shortcuts stay correct.

Throughput itself is measured by ``bench/control_plane_load.py``; these tests pin the mechanisms it relies on:
a page of runs validates only the configs it has not seen, a pooled connection is pinged only after sitting idle
(and replaced when that ping fails), a summary updated in place is served as updated, and several worker
processes serve one port.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fnd_helpers import AUTH, TOKEN, Api, free_port
from sqlalchemy import text

from genenv.contracts.epochs import EpochPhase, EpochSummary
from genenv.contracts.runs import RunConfig
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.repositories import epochs as epoch_repo
from genenv.db.repositories import runs as run_repo
from genenv.db.repositories.cache import ValidatedCache
from genenv.settings import DatabaseSettings


def _count_config_validations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    original = RunConfig.model_validate.__func__  # type: ignore[attr-defined]

    def counting(cls: type[RunConfig], obj: Any, *args: Any, **kwargs: Any) -> RunConfig:
        calls[0] += 1
        result: RunConfig = original(cls, obj, *args, **kwargs)
        return result

    monkeypatch.setattr(RunConfig, "model_validate", classmethod(counting))
    return calls


async def test_a_page_of_runs_validates_only_configs_it_has_not_seen(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = [await api.client.post("/v1/runs", json={"config": {"name": f"page-{i}"}}) for i in range(3)]
    ids = [r.json()["id"] for r in created]
    monkeypatch.setattr(run_repo, "_configs", ValidatedCache(max_size=1024))  # a freshly started process
    calls = _count_config_validations(monkeypatch)
    first = await api.client.get("/v1/runs", params={"limit": 500})
    assert first.status_code == 200
    items = first.json()["items"]
    assert {r["id"] for r in items} >= set(ids)
    assert calls[0] == len(items)  # each stored config validated once
    again = await api.client.get("/v1/runs", params={"limit": 500})
    shown = await api.client.get(f"/v1/runs/{ids[0]}")
    assert again.json() == first.json() and shown.json()["config"]["name"] == "page-0"
    assert calls[0] == len(items)


async def test_a_deleted_run_is_gone_from_the_list_and_its_page(api: Api) -> None:
    run_id = (await api.client.post("/v1/runs", json={"config": {"name": "to-delete"}})).json()["id"]
    assert (await api.client.get(f"/v1/runs/{run_id}")).status_code == 200
    assert (await api.client.delete(f"/v1/runs/{run_id}")).status_code == 204
    assert (await api.client.get(f"/v1/runs/{run_id}")).status_code == 404
    assert (await api.client.get(f"/v1/runs/{run_id}/epochs")).status_code == 404
    listed = (await api.client.get("/v1/runs", params={"limit": 500})).json()["items"]
    assert run_id not in {r["id"] for r in listed}


async def test_an_epoch_summary_updated_in_place_is_served_as_updated(api: Api, db_url: str) -> None:
    run_id = (await api.client.post("/v1/runs", json={"config": {"name": "summaries"}})).json()["id"]
    engine = make_engine(DatabaseSettings(url=db_url))
    sessions = make_session_factory(engine)
    try:
        with session_scope(sessions) as s:
            epoch_repo.upsert(s, run_id, 0, phase=EpochPhase.ROLLOUT)
            epoch_repo.upsert(s, run_id, 1, phase=EpochPhase.TRAIN, summary=EpochSummary(p_hat=0.25, rollouts=8))
        first = (await api.client.get(f"/v1/runs/{run_id}/epochs")).json()["items"]
        assert first[0]["summary"] is None and first[1]["summary"]["p_hat"] == 0.25
        with session_scope(sessions) as s:
            epoch_repo.upsert(s, run_id, 1, phase=EpochPhase.CLOSE, summary=EpochSummary(p_hat=0.5, rollouts=16))
            epoch_repo.upsert(s, run_id, 0, summary=EpochSummary(p_hat=0.125))
        second = (await api.client.get(f"/v1/runs/{run_id}/epochs")).json()["items"]
        assert [e["summary"]["p_hat"] for e in second] == [0.125, 0.5]
        assert second[1]["summary"]["rollouts"] == 16 and second[1]["phase"] == "close"
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_recently_used_connection_is_not_pinged_and_an_idle_dead_one_is_replaced(
    new_pg_database: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url = new_pg_database()
    engine = make_engine(DatabaseSettings(url=url, pool_size=1, ping_after_idle_s=0.5))
    pings = [0]
    do_ping = engine.dialect.do_ping

    def counting_ping(dbapi_conn: Any) -> bool:
        pings[0] += 1
        return do_ping(dbapi_conn)

    monkeypatch.setattr(engine.dialect, "do_ping", counting_ping)
    try:
        for _ in range(5):
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        assert pings[0] == 0  # pool_pre_ping would have pinged on 4 of these checkouts
        with engine.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        admin = make_engine(DatabaseSettings(url=url))
        with admin.connect() as conn:  # what a database restart does to a pooled connection
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        admin.dispose()
        time.sleep(0.8)
        with engine.connect() as conn:
            new_pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        assert pings[0] == 1 and new_pid != pid
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_two_worker_processes_serve_one_port(
    new_pg_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    url = new_pg_database()
    upgrade(url)
    port = free_port()
    log_path = tmp_path_factory.mktemp("workers") / "cp.log"
    env = {**os.environ, "GENENV_DATABASE__URL": url, "GENENV_AUTH__TOKENS": json.dumps([TOKEN]),
           "GENENV_QUEUE__EAGER": "false"}
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "genenv.cli.main", "serve", "control-plane", "--port", str(port), "--workers", "2"],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        created = httpx.post(f"{base}/v1/runs", json={"config": {"name": "two-workers"}}, headers=AUTH, timeout=30)
        assert created.status_code == 201, created.text
        # Every request on a fresh connection may land on either worker: all must see the same data.
        for _ in range(10):
            listed = httpx.get(f"{base}/v1/runs", headers=AUTH, timeout=30)
            assert [r["name"] for r in listed.json()["items"]] == ["two-workers"]
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        assert len(children) >= 2, children
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)
