"""genenv.http.make_app: envelope, auth, body limit, request ids, probes, metrics, OpenAPI — on a tiny app."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import APIRouter, FastAPI
from pydantic import BaseModel
from sqlalchemy import create_engine

from genenv.clients.base import ApiError, ServiceClient
from genenv.contracts.errors import ConflictError, NotFoundError
from genenv.http import make_app
from genenv.logging import current_request_id
from genenv.outages import DATABASE, classify
from genenv.settings import GenEnvSettings, ServiceUrls
from tests.conftest import free_port

TOKEN = "s3cret-token-value"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Item(BaseModel):
    name: str
    size: int


def _router() -> APIRouter:
    router = APIRouter(prefix="/v1")

    @router.post("/items/{item_id}")
    async def put_item(item_id: int, item: Item) -> Item:
        if item_id == 404:
            raise NotFoundError("item 404 not found", param="item_id", code="item_not_found")
        if item_id == 409:
            raise ConflictError("item is locked")
        if item_id == 500:
            raise RuntimeError("password=hunter2 leaked internals")
        if item_id == 503:  # the service's database does not answer (nothing listens on that port)
            engine = create_engine(f"postgresql+psycopg://genenv:hunter2@127.0.0.1:{free_port()}/genenv")
            try:
                engine.connect()
            finally:
                engine.dispose()
        return item

    @router.get("/request-id")
    async def request_id() -> dict[str, str | None]:
        return {"request_id": current_request_id()}

    return router


def _app(tokens: list[str] | None = None, checks: dict[str, object] | None = None) -> FastAPI:
    settings = GenEnvSettings(auth={"tokens": [TOKEN] if tokens is None else tokens}, max_body_bytes=2048)
    return make_app("test", settings, routers=[_router()], ready_checks=checks)  # type: ignore[arg-type]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        yield c


def _envelope(resp: httpx.Response, status: int, type_: str) -> dict[str, object]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["type"] == type_
    return dict(body["error"])


async def test_missing_token_is_401_with_challenge(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/items/1", json={"name": "a", "size": 1})
    err = _envelope(resp, 401, "authentication_error")
    assert "Bearer" in str(err["message"])
    assert resp.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("header", ["Basic dXNlcjpwYXNz", "Bearer", "Bearer   ", TOKEN])
async def test_malformed_authorization_is_401(client: httpx.AsyncClient, header: str) -> None:
    resp = await client.get("/v1/request-id", headers={"Authorization": header})
    _envelope(resp, 401, "authentication_error")


@pytest.mark.parametrize("token", ["wrong", TOKEN + "x", TOKEN[:-1], "ünïcode"])
async def test_wrong_token_is_403(client: httpx.AsyncClient, token: str) -> None:
    resp = await client.get("/v1/request-id", headers={b"Authorization": f"Bearer {token}".encode()})
    _envelope(resp, 403, "permission_error")


async def test_right_token_passes_and_scheme_is_case_insensitive(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/request-id", headers=AUTH)).status_code == 200
    assert (await client.get("/v1/request-id", headers={"Authorization": f"bearer {TOKEN}"})).status_code == 200


async def test_any_configured_token_is_accepted() -> None:
    app = _app(tokens=["first", "second"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        for token in ("first", "second"):
            assert (await c.get("/v1/request-id", headers={"Authorization": f"Bearer {token}"})).status_code == 200


async def test_probes_and_metrics_need_no_token(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).json() == {"status": "ready", "checks": {}}
    assert (await client.get("/metrics")).status_code == 200
    _envelope(await client.get("/openapi.json"), 401, "authentication_error")


async def test_empty_token_list_disables_auth() -> None:
    app = _app(tokens=[])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        assert (await c.get("/v1/request-id")).status_code == 200
    assert "securitySchemes" not in app.openapi().get("components", {})


async def test_tokens_are_never_logged(client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    await client.post("/v1/items/500", json={"name": "a", "size": 1}, headers=AUTH)
    await client.get("/v1/request-id", headers={"Authorization": f"Bearer {TOKEN}-wrong"})
    assert "leaked internals" in caplog.text  # the 500 was logged, with its traceback
    assert TOKEN not in caplog.text


async def test_domain_errors_map_to_their_status(client: httpx.AsyncClient) -> None:
    item = {"name": "a", "size": 1}
    err = _envelope(await client.post("/v1/items/404", json=item, headers=AUTH), 404, "not_found_error")
    assert err == {"message": "item 404 not found", "type": "not_found_error", "param": "item_id",
                   "code": "item_not_found"}
    _envelope(await client.post("/v1/items/409", json=item, headers=AUTH), 409, "conflict_error")


async def test_unhandled_error_is_500_without_internals(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/items/500", json={"name": "a", "size": 1}, headers=AUTH)
    err = _envelope(resp, 500, "server_error")
    assert "hunter2" not in resp.text and "RuntimeError" not in resp.text
    assert resp.headers["x-request-id"] in str(err["message"])


async def test_a_database_that_does_not_answer_is_503_database_unavailable_an_outage_for_the_caller(
    client: httpx.AsyncClient,
) -> None:
    # Not a 500: the caller (the orchestrator) waits on the database instead of counting a failed phase (issue 31).
    resp = await client.post("/v1/items/503", json={"name": "a", "size": 1}, headers=AUTH)
    err = _envelope(resp, 503, "service_unavailable_error")
    assert err["code"] == "database_unavailable" and "hunter2" not in resp.text
    assert resp.headers["x-request-id"] in str(err["message"])
    async with ServiceClient("http://test", transport=httpx.ASGITransport(app=_app()), token=TOKEN,
                             retries=0) as service:
        with pytest.raises(ApiError) as info:
            await service.request("POST", "/v1/items/503", Item, body=Item(name="a", size=1))
    outage = classify(info.value, ServiceUrls())
    assert outage is not None and outage.dependency == DATABASE


async def test_validation_error_is_422_with_field_path(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/items/1", json={"name": "a", "size": "big"}, headers=AUTH)
    err = _envelope(resp, 422, "invalid_request_error")
    assert err["param"] == "size" and err["code"] == "validation_error"
    assert "size:" in str(err["message"])
    resp = await client.post("/v1/items/notanint", json={"name": "a", "size": 1}, headers=AUTH)
    assert _envelope(resp, 422, "invalid_request_error")["param"] == "path.item_id"
    resp = await client.post("/v1/items/1", content=b"{not json", headers={**AUTH, "Content-Type": "application/json"})
    _envelope(resp, 422, "invalid_request_error")


async def test_unknown_route_and_method_are_enveloped(client: httpx.AsyncClient) -> None:
    _envelope(await client.get("/v1/nowhere", headers=AUTH), 404, "not_found_error")
    resp = await client.get("/v1/items/1", headers=AUTH)
    _envelope(resp, 405, "method_not_allowed_error")
    assert "POST" in resp.headers["allow"]


async def test_body_over_limit_by_content_length_is_413(client: httpx.AsyncClient) -> None:
    resp = await client.post("/v1/items/1", content=b"x" * 2049, headers={**AUTH, "Content-Type": "application/json"})
    err = _envelope(resp, 413, "request_too_large_error")
    assert "2048 bytes" in str(err["message"])


async def test_streamed_body_over_limit_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"y" * 300

    # No Content-Length (chunked): only counting the streamed bytes can catch it.
    resp = await client.post("/v1/items/1", content=chunks(), headers={**AUTH, "Content-Type": "application/json"})
    _envelope(resp, 413, "request_too_large_error")


async def test_body_at_limit_is_accepted(client: httpx.AsyncClient) -> None:
    body = b'{"name": "' + b"n" * (2048 - 23) + b'", "size": 1}'
    assert len(body) == 2048
    resp = await client.post("/v1/items/1", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text


async def test_request_id_is_echoed_generated_and_bound(client: httpx.AsyncClient) -> None:
    resp = await client.get("/v1/request-id", headers={**AUTH, "X-Request-Id": "abc-123.x:y"})
    assert resp.headers["x-request-id"] == "abc-123.x:y"
    assert resp.json() == {"request_id": "abc-123.x:y"}
    generated = await client.get("/v1/request-id", headers=AUTH)
    assert len(generated.headers["x-request-id"]) == 32
    unsafe = await client.get("/v1/request-id", headers={**AUTH, "X-Request-Id": "bad id with spaces"})
    assert unsafe.headers["x-request-id"] != "bad id with spaces"
    assert (await client.get("/v1/request-id")).headers["x-request-id"]  # also on a 401


async def test_readyz_runs_sync_and_async_checks() -> None:
    async def async_ok() -> None:
        return None

    def sync_broken() -> None:
        raise ConnectionError("db at 10.0.0.1 user admin refused")

    ok = _app(checks={"a": async_ok, "b": lambda: None})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=ok), base_url="http://t") as c:
        assert (await c.get("/readyz")).json() == {"status": "ready", "checks": {"a": "ok", "b": "ok"}}
    bad = _app(checks={"a": async_ok, "database": sync_broken})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=bad), base_url="http://t") as c:
        resp = await c.get("/readyz")
    err = _envelope(resp, 503, "service_unavailable_error")
    assert err["message"] == "not ready: database (ConnectionError)"
    assert "10.0.0.1" not in resp.text


async def test_metrics_use_route_templates_and_per_app_registries() -> None:
    first, second = _app(), _app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=first), base_url="http://t") as c:
        for i in (1, 2, 404):
            await c.post(f"/v1/items/{i}", json={"name": "a", "size": 1}, headers=AUTH)
        await c.get("/v1/request-id")
        await c.get("/no/such/path/123", headers=AUTH)
        text = (await c.get("/metrics")).text
    assert 'genenv_http_requests_total{method="POST",route="/v1/items/{item_id}",status="200"} 2.0' in text
    assert 'genenv_http_requests_total{method="POST",route="/v1/items/{item_id}",status="404"} 1.0' in text
    assert 'genenv_http_requests_total{method="GET",route="/v1/request-id",status="401"} 1.0' in text
    assert 'route="<unmatched>",status="404"' in text
    assert "/v1/items/2" not in text and "/no/such/path" not in text
    assert 'genenv_http_request_duration_seconds_count{method="POST",route="/v1/items/{item_id}"} 3.0' in text
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=second), base_url="http://t") as c:
        assert "/v1/items/{item_id}" not in (await c.get("/metrics")).text


def test_openapi_documents_the_envelope_and_bearer_auth() -> None:
    schema = _app().openapi()
    responses = schema["paths"]["/v1/items/{item_id}"]["post"]["responses"]
    for status in ("400", "401", "403", "404", "409", "413", "422", "500", "503"):
        ref = responses[status]["content"]["application/json"]["schema"]["$ref"]
        assert ref == "#/components/schemas/ErrorEnvelope"
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert "/metrics" not in schema["paths"]
    assert "503" in schema["paths"]["/readyz"]["get"]["responses"]
