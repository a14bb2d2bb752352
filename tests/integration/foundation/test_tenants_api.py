"""Tenants (issue 33): tenant tokens see only their tenant's runs and experiments, service tokens see all, the
per-tenant limits answer 429, and the live generator's adapter must be the caller's; on SQLite and Postgres.

The isolation test enumerates the control plane's routes: a new route under /v1/runs/{run_id} or
/v1/experiments/{experiment_id} is tested without being listed here, and fails if it lets another tenant in.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fnd_helpers import AUTH, RecordingEnqueuer, app_settings
from sqlalchemy import select

from genenv.contracts.adapters import adapter_name
from genenv.contracts.runs import RunStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import EpochRow, RunRow, TaskRow
from genenv.db.repositories import runs
from genenv.domains import get_domain
from genenv.inference.base import InferenceError
from genenv.settings import GenEnvSettings
from genenv_control_plane.app import create_app

TOKENS = {"tok-a": "team-a", "tok-b": "team-b", "tok-c": "team-c", "tok-d": "team-d"}
A = {"Authorization": "Bearer tok-a"}
B = {"Authorization": "Bearer tok-b"}
C = {"Authorization": "Bearer tok-c"}
D = {"Authorization": "Bearer tok-d"}
SERVICE = AUTH
UNKNOWN = "0" * 32
TEMPLATE = {"name": "t", "epochs": 2, "seeds_per_epoch": 2}
# Bodies for the scoped routes that take one (valid, so a 404 is the tenant check and not validation); a new route
# with a body fails the isolation test with a 422 until it is added here.
BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/runs/{run_id}/leases"): {"limit": 1},
    ("POST", "/v1/runs/{run_id}/attempts"): {"lease_id": UNKNOWN, "attempts": [{"task_id": 1, "reply": "7"}]},
}


def _settings(db_url: str) -> GenEnvSettings:
    return app_settings(
        db_url,
        auth={"tokens": [AUTH["Authorization"].split()[1]], "tenant_tokens": TOKENS},
        tenants={"max_running_runs": 1, "max_open_leases": 1},
    )


@dataclass
class Tenants:
    client: httpx.AsyncClient
    app: FastAPI
    db_url: str


@pytest.fixture
async def api(db_url: str) -> AsyncIterator[Tenants]:
    app = create_app(_settings(db_url), enqueuer=RecordingEnqueuer(db_url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cp") as client:
        yield Tenants(client, app, db_url)
    app.state.control_plane.close()


def _sessions(db_url: str) -> Any:
    return make_session_factory(make_engine(GenEnvSettings(database={"url": db_url}).database))


async def _run(api: Tenants, headers: dict[str, str], *, running: bool = False) -> str:
    """A run created with ``headers``; with ``running`` an external_agent run at epoch 0's rollout with 3 tasks."""
    config: dict[str, Any] = {"mode": "external_agent", "rollouts_per_task": 2, "epochs": 2} if running else {}
    resp = await api.client.post("/v1/runs", json={"config": config}, headers=headers)
    assert resp.status_code == 201, resp.text
    run_id = str(resp.json()["id"])
    if running:
        domain = get_domain("arithmetic")
        with session_scope(_sessions(api.db_url)) as s:
            runs.move(s, runs.get(s, run_id), RunStatus.RUNNING)
            s.add(EpochRow(run_id=run_id, index=0, phase="rollout", summary={}))
            s.add_all([TaskRow(run_id=run_id, epoch=0, seed_id="s", domain="arithmetic", variation=i, status="valid",
                               payload=domain.validate_generation({"expression": e}, None), raw_text="{}",
                               prompt_messages=[]) for i, e in enumerate(["3 + 4", "2 * 5", "9 - 1"])])
    return run_id


async def _experiment(api: Tenants, headers: dict[str, str], **fields: Any) -> dict[str, Any]:
    body = {"name": "exp", "template": TEMPLATE, "modes": ["genenv", "random_simulator"], "replicates": 1, **fields}
    resp = await api.client.post("/v1/experiments", json=body, headers=headers)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


def _scoped_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path) of every route that addresses a run or an experiment by id."""
    found = [(method, r.path) for r in app.routes if isinstance(r, APIRoute)
             if "{run_id}" in r.path or "{experiment_id}" in r.path for method in sorted(r.methods)]
    assert len(found) >= 14, found  # the runs', inspection, leases and experiments' routers are all here
    return found


def _fill(path: str, run_id: str, experiment_id: str) -> str:
    filled = path.replace("{run_id}", run_id).replace("{experiment_id}", experiment_id)
    assert "{" not in filled, f"{path}: give its other path parameters a value in this test"
    return filled


async def _call(api: Tenants, method: str, path: str, headers: dict[str, str], run_id: str,
                experiment_id: str) -> httpx.Response:
    return await api.client.request(method, _fill(path, run_id, experiment_id), headers=headers,
                                    json=BODIES.get((method, path)))


async def test_every_scoped_route_is_404_to_another_tenant(api: Tenants) -> None:
    run_a = await _run(api, A, running=True)
    experiment_a = (await _experiment(api, A))["id"]
    routes = _scoped_routes(api.app)
    for method, path in routes:
        other = await _call(api, method, path, B, run_a, experiment_a)
        unknown = await _call(api, method, path, B, UNKNOWN, UNKNOWN)
        assert other.status_code == 404, (method, path, other.text)
        # The same envelope as an unknown id: nothing tells B that A's id exists.
        assert other.json()["error"] | {"message": ""} == unknown.json()["error"] | {"message": ""}, (method, path)
        assert set(other.json()) == {"error"}
    # Nothing B tried changed A's objects (its delete, cancel and start were 404s).
    for headers in (A, SERVICE):
        for method, path in routes:
            if method == "GET":
                resp = await _call(api, method, path, headers, run_a, experiment_a)
                assert resp.status_code == 200, (method, path, resp.text)
    assert (await api.client.get(f"/v1/runs/{run_a}", headers=A)).json()["status"] == "running"
    assert (await api.client.get(f"/v1/experiments/{experiment_a}", headers=A)).json()["status"] == "created"


async def test_tenant_actions_work_on_own_objects(api: Tenants) -> None:
    run_a = await _run(api, A, running=True)
    lease = await api.client.post(f"/v1/runs/{run_a}/leases", json={"limit": 1}, headers=A)
    assert lease.status_code == 200 and len(lease.json()["items"]) == 1, lease.text
    item = lease.json()["items"][0]
    report = {"lease_id": lease.json()["lease_id"],
              "attempts": [{"task_id": item["task_id"], "reply": "0"}] * item["attempts"]}
    recorded = await api.client.post(f"/v1/runs/{run_a}/attempts", json=report, headers=A)
    assert recorded.status_code == 200, recorded.text
    rollouts = await api.client.get(f"/v1/runs/{run_a}/rollouts", headers=A)
    assert len(rollouts.json()["items"]) == item["attempts"]
    assert (await api.client.get(f"/v1/runs/{run_a}/rollouts", headers=B)).status_code == 404
    assert (await api.client.post(f"/v1/runs/{run_a}/pause", headers=A)).json()["status"] == "paused"
    assert (await api.client.delete(f"/v1/runs/{run_a}", headers=B)).status_code == 404
    assert (await api.client.delete(f"/v1/runs/{run_a}", headers=A)).status_code == 204


async def test_lists_show_only_the_callers_tenant(api: Tenants) -> None:
    run_a, run_b, run_s = await _run(api, A), await _run(api, B), await _run(api, SERVICE)
    exp_a, exp_b = (await _experiment(api, A)), (await _experiment(api, B))
    members_a = {m["run_id"] for m in exp_a["members"]}

    async def listed(path: str, headers: dict[str, str]) -> set[str]:
        resp = await api.client.get(path, params={"limit": 200}, headers=headers)
        assert resp.status_code == 200, resp.text
        return {i["id"] for i in resp.json()["items"]}

    runs_a, runs_b, runs_s = [await listed("/v1/runs", h) for h in (A, B, SERVICE)]
    assert run_a in runs_a and members_a <= runs_a and run_b not in runs_a and run_s not in runs_a
    assert run_b in runs_b and not ({run_a, run_s} | members_a) & runs_b
    assert {run_a, run_b, run_s} | members_a <= runs_s
    exps_a, exps_b, exps_s = [await listed("/v1/experiments", h) for h in (A, B, SERVICE)]
    assert exp_a["id"] in exps_a and exp_b["id"] not in exps_a
    assert exp_b["id"] in exps_b and exp_a["id"] not in exps_b
    assert {exp_a["id"], exp_b["id"]} <= exps_s
    # Ownership is stored: member runs carry their experiment's tenant, a service token's run the default one.
    with session_scope(_sessions(api.db_url)) as s:
        tenants = dict(s.execute(select(RunRow.id, RunRow.tenant).where(
            RunRow.id.in_([run_a, run_b, run_s, *members_a]))).tuples().all())
    assert tenants == {run_a: "team-a", run_b: "team-b", run_s: "default", **{m: "team-a" for m in members_a}}


async def test_running_runs_limit_is_a_429(api: Tenants) -> None:
    first, second = await _run(api, C), await _run(api, C)
    assert (await api.client.post(f"/v1/runs/{first}/start", headers=C)).status_code == 200
    over = await api.client.post(f"/v1/runs/{second}/start", headers=C)
    assert over.status_code == 429, over.text
    err = over.json()["error"]
    assert err["type"] == "rate_limit_error" and err["code"] == "tenant_limit_exceeded"
    assert "tenants.max_running_runs" in err["message"]
    assert (await api.client.get(f"/v1/runs/{second}", headers=C)).json()["status"] == "created"  # rolled back
    experiment = await _experiment(api, C, concurrent=True)
    assert (await api.client.post(f"/v1/experiments/{experiment['id']}/start", headers=C)).status_code == 429
    shown = (await api.client.get(f"/v1/experiments/{experiment['id']}", headers=C)).json()
    assert shown["status"] == "created"
    # A service token is not held to a tenant's limits; the tenant may start again once a run stopped.
    assert (await api.client.post(f"/v1/runs/{second}/start", headers=SERVICE)).status_code == 200
    assert (await api.client.post(f"/v1/runs/{second}/pause", headers=C)).status_code == 200
    assert (await api.client.post(f"/v1/runs/{first}/cancel", headers=C)).status_code == 200
    assert (await api.client.post(f"/v1/runs/{second}/resume", headers=C)).status_code == 200


async def test_concurrent_starts_cannot_pass_the_limit_together(api: Tenants) -> None:
    ids = [await _run(api, D) for _ in range(4)]
    answers = await asyncio.gather(*(api.client.post(f"/v1/runs/{i}/start", headers=D) for i in ids))
    assert sorted(a.status_code for a in answers) == [200, 429, 429, 429], [a.text for a in answers]
    statuses = [(await api.client.get(f"/v1/runs/{i}", headers=D)).json()["status"] for i in ids]
    assert sorted(statuses) == ["created", "created", "created", "running"]


async def test_open_leases_limit_is_a_429(api: Tenants) -> None:
    run_b = await _run(api, B, running=True)
    first = await api.client.post(f"/v1/runs/{run_b}/leases", json={"limit": 1}, headers=B)
    assert first.status_code == 200 and first.json()["lease_id"], first.text
    over = await api.client.post(f"/v1/runs/{run_b}/leases", json={"limit": 1}, headers=B)
    assert over.status_code == 429, over.text
    assert over.json()["error"]["code"] == "tenant_limit_exceeded"
    assert "tenants.max_open_leases" in over.json()["error"]["message"]
    # A service token is not held to the limit (its leases on a tenant's run would count for that tenant).
    run_s = await _run(api, SERVICE, running=True)
    for _ in range(2):
        leased = await api.client.post(f"/v1/runs/{run_s}/leases", json={"limit": 1}, headers=SERVICE)
        assert leased.status_code == 200, leased.text
    # Reporting the lease in full frees its place.
    item = first.json()["items"][0]
    report = {"lease_id": first.json()["lease_id"],
              "attempts": [{"task_id": item["task_id"], "reply": "1"}] * item["attempts"]}
    assert (await api.client.post(f"/v1/runs/{run_b}/attempts", json=report, headers=B)).status_code == 200
    again = await api.client.post(f"/v1/runs/{run_b}/leases", json={"limit": 1}, headers=B)
    assert again.status_code == 200, again.text


class _NoModel:
    """A simulator backend with no model behind it: a request that passes the tenant check fails with a 503."""

    async def chat(self, *args: Any, **kwargs: Any) -> Any:
        raise InferenceError("no model in this test")

    async def chat_many(self, *args: Any, **kwargs: Any) -> Any:
        raise InferenceError("no model in this test")

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise InferenceError("no model in this test")

    async def aclose(self) -> None:
        return None


async def test_live_generator_adapter_must_be_the_callers(api: Tenants) -> None:
    from genenv_simulator.app import create_app as create_simulator

    run_a = await _run(api, A)
    sim = create_simulator(_settings(api.db_url), backend=_NoModel())  # type: ignore[arg-type]
    body = {"domain": "arithmetic", "seeds": [{"id": "s", "payload": {"expression": "1 + 2"}}], "n": 1,
            "adapter": adapter_name(run_a, "simulator", 1)}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=sim), base_url="http://sim") as client:
        for headers, status in ((B, 404), (A, 503), (SERVICE, 503)):
            resp = await client.post("/v1/tasks:generate", json=body, headers=headers)
            assert resp.status_code == status, (headers, resp.text)
        denied = (await client.post("/v1/tasks:generate", json=body, headers=B)).json()["error"]
        assert denied["code"] == "adapter_not_found" and denied["param"] == "adapter"
        unknown = await client.post("/v1/tasks:generate", json=body | {"adapter": "not-an-adapter"}, headers=A)
        assert unknown.status_code == 404
        stored = body | {"adapter": None, "run_id": run_a, "epoch": 0}
        assert (await client.post("/v1/tasks:generate", json=stored, headers=B)).status_code == 404
        assert (await client.post("/v1/tasks:generate", json=stored, headers=A)).status_code == 503


async def test_curriculum_routes_are_isolated_and_the_verifier_takes_no_tenant_token(api: Tenants) -> None:
    from genenv_curriculum.app import create_app as create_curriculum
    from genenv_verifier.app import create_app as create_verifier

    run_a = await _run(api, A)
    curriculum = create_curriculum(_settings(api.db_url))
    routes = [path for r in curriculum.routes if isinstance(r, APIRoute) and "{run_id}" in (path := r.path)]
    assert len(routes) == 3, routes
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=curriculum), base_url="http://cur") as client:
        for path in routes:
            url = path.replace("{run_id}", run_a).replace("{epoch}", "0")
            assert "{" not in url, path
            for headers, status in ((B, 404), (A, 200), (SERVICE, 200)):
                resp = await client.get(url, headers=headers)
                assert resp.status_code == status, (path, headers, resp.text)
            assert (await client.get(url, headers=B)).json()["error"]["code"] == "run_not_found"
        scored = await client.post("/v1/score", json={"run_id": run_a, "counts": [{"seed_id": "s", "k": 1, "n": 2}]},
                                   headers=B)
        assert scored.status_code == 404, scored.text
    # The verifier keeps no tenant's data but runs benchmarks on runs' adapters: tenant tokens are not its callers.
    verifier = create_verifier(_settings(api.db_url))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=verifier), base_url="http://ver") as client:
        assert (await client.get("/openapi.json", headers=A)).status_code == 403
        assert (await client.get("/openapi.json", headers=SERVICE)).status_code == 200
