"""Hostile run configs, DELETE /v1/runs/{id} and the start-time base-model check (issue 14, items 5, 6, 9, 10).

Through the control-plane app on real SQLite and real Postgres (where non-finite floats used to reach JSONB: 500).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fnd_helpers import AUTH, Api, RecordingEnqueuer, app_settings, seed_run_data
from sqlalchemy import func, select

from genenv.db import models
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.settings import GenEnvSettings
from genenv_control_plane.app import create_app
from genenv_control_plane.serving import BaseModelCheck


def _error(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


async def _post_raw(api: Api, text: str) -> httpx.Response:
    return await api.client.post("/v1/runs", content=text, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(
    ("raw", "param"),
    [
        ('{"config": {"curriculum": {"beta": Infinity}}}', "config.curriculum.beta"),
        ('{"config": {"agent": {"learning_rate": 1e309}}}', "config.agent.learning_rate"),
        ('{"config": {"lora": {"alpha": NaN}}}', "config.lora.alpha"),
        ('{"config": {"simulator": {"kl_cap": -Infinity}}}', "config.simulator.kl_cap"),
        ('{"config": {"curriculum": {"rwr_lambda": 1e300}}}', "config.curriculum.rwr_lambda"),
    ],
)
async def test_non_finite_and_huge_floats_are_422_naming_the_field(api: Api, raw: str, param: str) -> None:
    err = _error(await _post_raw(api, raw), 422)
    assert err["param"] == param and err["code"] == "validation_error"


@pytest.mark.parametrize(
    ("config", "param", "needle"),
    [
        ({"agent": {"kl_coef": False}}, "config.agent.kl_coef", "valid number"),
        ({"epochs": "3"}, "config.epochs", "valid integer"),
        ({"rollouts_per_task": 4.0}, "config.rollouts_per_task", "valid integer"),
        ({"curriculum": {"use_beta_prior": "yes"}}, "config.curriculum.use_beta_prior", "valid boolean"),
        ({"random_seed": 9_200_000_000_000}, "config.random_seed", "less than or equal to 4294967295"),
        ({"random_seed": -1}, "config.random_seed", "greater than or equal to 0"),
        ({"base_model": "/models/../etc"}, "config.base_model", "not a model name"),
        ({"base_model": "models/./x"}, "config.base_model", "not a model name"),
        ({"base_model": "../../models/x"}, "config.base_model", "not a model name"),
        ({"base_model": "Qwen/../../x"}, "config.base_model", "not a model name"),
        ({"base_model": "m" * 201}, "config.base_model", "at most 200"),
        ({"name": "n" * 201}, "config.name", "at most 200"),
        ({"domain": "d" * 65}, "config.domain", "at most 64"),
        ({"lora": {"target_modules": ["q" * 101]}}, "config.lora.target_modules.0", "at most 100"),
        ({"lora": {"target_modules": ["q_proj"] * 65}}, "config.lora.target_modules", "at most 64"),
        ({"lora": {"target_modules": ["q proj;"]}}, "config.lora.target_modules.0", "pattern"),
        ({"eval_benchmarks": ["bfcl"] * 7}, "config.eval_benchmarks", "at most 6"),
        ({"seeds_per_epoch": 2**40}, "config.seeds_per_epoch", "less than or equal"),
    ],
)
async def test_loose_types_and_unbounded_values_are_422(
    api: Api, config: dict[str, Any], param: str, needle: str
) -> None:
    err = _error(await api.client.post("/v1/runs", json={"config": config}), 422)
    assert err["param"] == param and needle in err["message"], err


async def _client(db_url: str, **paths: object) -> tuple[httpx.AsyncClient, Any]:
    app = create_app(app_settings(db_url, paths=paths), enqueuer=RecordingEnqueuer(db_url))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cp", headers=AUTH), app


async def test_valid_names_hub_ids_and_paths_under_the_model_cache_are_accepted(db_url: str) -> None:
    client, app = await _client(db_url, model_cache="/var/lib/genenv/models")
    async with client:
        for name in ("smollm2-135m-instruct", "Qwen/Qwen2.5-0.5B-Instruct", "/var/lib/genenv/models/Qwen/Qwen2.5-0.5B",
                     "/var/lib/genenv/models"):
            resp = await client.post("/v1/runs", json={"config": {"base_model": name, "random_seed": 2**32 - 1}})
            assert resp.status_code == 201, resp.text
            assert resp.json()["config"]["base_model"] == name
    app.state.control_plane.close()


@pytest.mark.parametrize("path", ["/etc/passwd", "/var/lib/genenv/models-other/x", "/var/lib/genenv", "/root/secrets"])
async def test_absolute_base_model_outside_the_model_roots_is_422_naming_the_roots(db_url: str, path: str) -> None:
    """Issue 22, item 2: an absolute path is accepted only under the model roots (the model cache by default)."""
    client, app = await _client(db_url, model_cache="/var/lib/genenv/models")
    async with client:
        before = (await client.get("/v1/runs")).json()["items"]
        err = _error(await client.post("/v1/runs", json={"config": {"base_model": path}}), 422)
        assert err["param"] == "config.base_model" and err["code"] == "base_model_outside_roots", err
        assert "/var/lib/genenv/models" in err["message"] and path in err["message"], err
        template = {"name": "x", "modes": ["genenv"], "template": {"base_model": path}}
        err = _error(await client.post("/v1/experiments", json=template), 422)
        assert err["param"] == "template.base_model" and err["code"] == "base_model_outside_roots", err
        assert (await client.get("/v1/runs")).json()["items"] == before  # nothing stored
    app.state.control_plane.close()


async def test_configured_model_roots_replace_the_model_cache(db_url: str) -> None:
    client, app = await _client(db_url, model_cache="/var/lib/genenv/models", model_roots=["/mnt/models", "/opt/m"])
    async with client:
        for path, status in (("/mnt/models/qwen", 201), ("/opt/m/x/y", 201), ("/var/lib/genenv/models/q", 422)):
            resp = await client.post("/v1/runs", json={"config": {"base_model": path}})
            assert resp.status_code == status, resp.text
        assert "/mnt/models, /opt/m" in resp.json()["error"]["message"]
    app.state.control_plane.close()


def _counts(db_url: str, run_id: str) -> dict[str, int]:
    engine = make_engine(GenEnvSettings(database={"url": db_url}).database)
    out: dict[str, int] = {}
    try:
        with session_scope(make_session_factory(engine)) as s:
            for table in (models.RunRow, models.EpochRow, models.TaskRow, models.SeedStatRow,
                          models.CurriculumScoreRow, models.AdapterRow, models.EvaluationRow):
                column = table.id if table is models.RunRow else table.run_id  # type: ignore[attr-defined]
                out[table.__tablename__] = s.scalar(select(func.count()).where(column == run_id)) or 0
            task_ids = select(models.TaskRow.id).where(models.TaskRow.run_id == run_id).scalar_subquery()
            out["rollout"] = s.scalar(select(func.count()).where(models.RolloutRow.task_id.in_(task_ids))) or 0
            out["verdict"] = s.scalar(select(func.count(models.VerdictRow.id))) or 0
    finally:
        engine.dispose()
    return out


async def test_delete_removes_the_run_and_all_its_rows_but_not_a_running_run(api: Api, db_url: str) -> None:
    keep = (await api.client.post("/v1/runs", json={"config": {"name": "keep"}})).json()["id"]
    gone = (await api.client.post("/v1/runs", json={"config": {"name": "gone"}})).json()["id"]
    engine = make_engine(GenEnvSettings(database={"url": db_url}).database)
    with session_scope(make_session_factory(engine)) as s:
        seed_run_data(s, keep)
        seed_run_data(s, gone)
        s.add(models.EpochRow(run_id=gone, index=0, phase="rollout"))
    engine.dispose()
    before = _counts(db_url, gone)
    assert before["task"] > 0 and before["rollout"] > 0 and before["epoch"] == 1

    assert (await api.client.post(f"/v1/runs/{gone}/start")).status_code == 200
    err = _error(await api.client.delete(f"/v1/runs/{gone}"), 409)
    assert err["code"] == "run_running" and "pause or cancel" in err["message"]
    assert (await api.client.post(f"/v1/runs/{gone}/cancel")).status_code == 200

    resp = await api.client.delete(f"/v1/runs/{gone}")
    assert resp.status_code == 204 and resp.content == b""
    after = _counts(db_url, gone)
    assert all(after[t] == 0 for t in after if t != "verdict"), after
    kept = _counts(db_url, keep)
    # Only the other run's verdicts are left: the deleted run's went with its rollouts.
    assert kept["task"] == before["task"] and after["verdict"] == kept["rollout"]
    assert _error(await api.client.get(f"/v1/runs/{gone}"), 404)["code"] == "run_not_found"
    assert _error(await api.client.delete(f"/v1/runs/{gone}"), 404)["code"] == "run_not_found"


async def _api_with(db_url: str, settings: GenEnvSettings, transport: httpx.AsyncBaseTransport | None) -> Api:
    enqueuer = RecordingEnqueuer(db_url)
    app = create_app(settings, enqueuer=enqueuer)
    app.state.control_plane.base_model_check = BaseModelCheck(settings, transport=transport)
    asgi = httpx.ASGITransport(app=app)
    return Api(httpx.AsyncClient(transport=asgi, base_url="http://cp", headers=AUTH), asgi, enqueuer, app)


async def test_start_refuses_a_base_model_the_local_backend_does_not_serve(db_url: str) -> None:
    settings = app_settings(db_url, inference={"backend": "local", "base_model": "smollm2-135m-instruct"})
    api = await _api_with(db_url, settings, None)
    async with api.client:
        run = (await api.client.post("/v1/runs", json={"config": {"base_model": "Qwen/Qwen2.5-7B-Instruct"}})).json()
        err = _error(await api.client.post(f"/v1/runs/{run['id']}/start"), 409)
        assert err["code"] == "base_model_mismatch" and err["param"] == "config.base_model"
        assert "'Qwen/Qwen2.5-7B-Instruct'" in err["message"] and "'smollm2-135m-instruct'" in err["message"]
        assert (await api.client.get(f"/v1/runs/{run['id']}")).json()["status"] == "created"
        assert api.enqueuer.calls == []
    api.app.state.control_plane.close()


def _vllm_models(root: str) -> httpx.MockTransport:
    """What vLLM answers on GET /v1/models: the base model (id = served name, root = --model) and an adapter."""

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/models" and request.headers["Authorization"] == "Bearer vllm-key"
        return httpx.Response(200, json={"object": "list", "data": [
            {"id": "base", "object": "model", "root": root, "parent": None},
            {"id": "r-agent-v1", "object": "model", "root": "/adapters/r/agent/v1", "parent": "base"},
        ]})

    return httpx.MockTransport(handler)


async def test_start_checks_the_base_model_the_vllm_server_serves(db_url: str) -> None:
    settings = app_settings(
        db_url,
        inference={"backend": "vllm", "api_key": "vllm-key"},
        services={"vllm_agent": "http://vllm:8000", "vllm_simulator": "http://vllm:8000"},
    )
    api = await _api_with(db_url, settings, _vllm_models("/var/lib/genenv/models/Qwen/Qwen2.5-0.5B-Instruct"))
    async with api.client:
        wrong = (await api.client.post("/v1/runs", json={"config": {"base_model": "smollm2-135m-instruct"}})).json()
        err = _error(await api.client.post(f"/v1/runs/{wrong['id']}/start"), 409)
        assert "'smollm2-135m-instruct'" in err["message"]
        assert "'/var/lib/genenv/models/Qwen/Qwen2.5-0.5B-Instruct'" in err["message"]
        assert "http://vllm:8000" in err["message"]
        body = {"config": {"base_model": "Qwen/Qwen2.5-0.5B-Instruct"}}
        right = (await api.client.post("/v1/runs", json=body)).json()
        started = await api.client.post(f"/v1/runs/{right['id']}/start")
        assert started.status_code == 200 and started.json()["status"] == "running"
    api.app.state.control_plane.close()


async def test_start_goes_ahead_when_the_vllm_server_cannot_be_asked(db_url: str) -> None:
    settings = app_settings(db_url, inference={"backend": "vllm"},
                            services={"vllm_agent": "http://vllm:8000", "vllm_simulator": "http://vllm:8000"})

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    # A server still loading is not a reason to refuse: the run's first phase waits for it and reports an outage.
    api = await _api_with(db_url, settings, httpx.MockTransport(refuse))
    async with api.client:
        run = (await api.client.post("/v1/runs", json={})).json()
        started = await api.client.post(f"/v1/runs/{run['id']}/start")
        assert started.status_code == 200 and started.json()["status"] == "running"
    api.app.state.control_plane.close()
