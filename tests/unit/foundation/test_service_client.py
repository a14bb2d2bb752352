"""genenv.clients.base.ServiceClient: envelope → ApiError, request ids, bearer token, retries only for GET."""

from __future__ import annotations

import httpx
import pytest
from fastapi import APIRouter, Header
from pydantic import BaseModel

from genenv.clients.base import ApiError, ServiceClient, ServiceUnreachableError
from genenv.contracts.errors import ConflictError
from genenv.http import make_app
from genenv.logging import reset_request_id, set_request_id
from genenv.settings import GenEnvSettings


class Echo(BaseModel):
    request_id: str | None
    value: int


def _app() -> httpx.ASGITransport:
    router = APIRouter()

    @router.post("/v1/echo")
    async def echo(body: Echo, x_request_id: str | None = Header(default=None)) -> Echo:
        if body.value < 0:
            raise ConflictError("negative values conflict", param="value", code="negative")
        return Echo(request_id=x_request_id, value=body.value)

    app = make_app("t", GenEnvSettings(auth={"tokens": ["tok"]}), routers=[router])
    return httpx.ASGITransport(app=app)


async def test_success_forwards_request_id_and_token() -> None:
    async with ServiceClient("http://svc", token="tok", transport=_app()) as client:
        token = set_request_id("req-42")
        try:
            out = await client.request("POST", "/v1/echo", Echo, body=Echo(request_id=None, value=3))
        finally:
            reset_request_id(token)
    assert out == Echo(request_id="req-42", value=3)


async def test_error_envelope_becomes_typed_api_error() -> None:
    async with ServiceClient("http://svc", token="tok", transport=_app()) as client:
        with pytest.raises(ApiError) as info:
            await client.request("POST", "/v1/echo", Echo, body=Echo(request_id=None, value=-1))
    err = info.value
    assert (err.status_code, err.type, err.param, err.code) == (409, "conflict_error", "value", "negative")
    assert err.message == "negative values conflict"
    assert err.request_id and len(err.request_id) == 32


async def test_wrong_token_is_403_api_error() -> None:
    async with ServiceClient("http://svc", token="nope", transport=_app()) as client:
        with pytest.raises(ApiError) as info:
            await client.request("POST", "/v1/echo", Echo, body=Echo(request_id=None, value=1))
    assert info.value.status_code == 403 and info.value.type == "permission_error"


async def test_foreign_error_body_is_kept_readable() -> None:
    transport = httpx.MockTransport(lambda _req: httpx.Response(502, text="<html>bad gateway</html>"))
    async with ServiceClient("http://svc", transport=transport) as client:
        with pytest.raises(ApiError) as info:
            await client.request("GET", "/x", Echo)
    assert info.value.status_code == 502 and info.value.type == "http_error"
    assert "bad gateway" in info.value.message


async def test_malformed_success_body_is_an_api_error() -> None:
    transport = httpx.MockTransport(lambda _req: httpx.Response(200, json={"unexpected": True}))
    async with ServiceClient("http://svc", transport=transport) as client:
        with pytest.raises(ApiError) as info:
            await client.request("GET", "/x", Echo)
    assert info.value.type == "invalid_response_error"


def _flaky(failures: int, exc: type[httpx.TransportError]) -> tuple[httpx.MockTransport, list[str]]:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.method)
        if len(calls) <= failures:
            raise exc("boom", request=request)
        return httpx.Response(200, json={"request_id": None, "value": 7})

    return httpx.MockTransport(handler), calls


async def test_get_is_retried_on_connection_errors() -> None:
    transport, calls = _flaky(2, httpx.ConnectError)
    async with ServiceClient("http://svc", transport=transport, retries=2) as client:
        assert (await client.request("GET", "/x", Echo)).value == 7
    assert calls == ["GET", "GET", "GET"]


async def test_get_gives_up_after_retries() -> None:
    transport, calls = _flaky(10, httpx.ConnectError)
    async with ServiceClient("http://svc", transport=transport, retries=1) as client:
        with pytest.raises(ServiceUnreachableError) as info:
            await client.request("GET", "/x", Echo)
    assert len(calls) == 2
    assert info.value.status_code is None and info.value.type == "connection_error"


async def test_post_is_never_retried() -> None:
    transport, calls = _flaky(1, httpx.ConnectError)
    async with ServiceClient("http://svc", transport=transport, retries=3) as client:
        with pytest.raises(ServiceUnreachableError):
            await client.request("POST", "/x", Echo, body=Echo(request_id=None, value=1))
    assert calls == ["POST"]


async def test_read_timeout_is_not_retried_even_for_get() -> None:
    transport, calls = _flaky(1, httpx.ReadTimeout)
    async with ServiceClient("http://svc", transport=transport, retries=3) as client:
        with pytest.raises(ServiceUnreachableError) as info:
            await client.request("GET", "/x", Echo)
    assert calls == ["GET"] and info.value.type == "timeout_error"
