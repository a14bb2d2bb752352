"""genenv.outages.classify: a dependency that does not answer is an outage (the run waits), anything else a failure.

The errors are real where that is cheap: a refused connection to a closed port, a server that never answers or
hangs up, Postgres and Redis on a closed port, the typed clients over a swapped transport.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import redis
from kombu import Connection
from pydantic import BaseModel, ValidationError
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from genenv.clients.base import ApiError, ServiceClient
from genenv.clients.simulator import SimulatorClient
from genenv.contracts.errors import ErrorBody, ErrorEnvelope
from genenv.inference.base import InferenceError
from genenv.outages import Outage, classify, dependency_of_url, one_line
from genenv.serving.publisher import AdapterPublishError, VLLMAdapterServer
from genenv.settings import ServiceUrls
from tests.conftest import free_port


class Out(BaseModel):
    value: int


def _services(port: int) -> ServiceUrls:
    return ServiceUrls(simulator="inprocess", verifier=f"http://127.0.0.1:{port}", curriculum="http://cur:8003",
                       vllm_agent="http://vllm:8000", vllm_simulator="http://vllm-sim:8000")


async def _raised(call: Callable[[], object]) -> BaseException:
    try:
        result = call()
        if asyncio.iscoroutine(result):
            await result
    except Exception as exc:
        return exc
    raise AssertionError("no exception")


async def test_refused_connection_of_a_typed_client_is_an_outage_of_that_service() -> None:
    port = free_port()
    async with ServiceClient(f"http://127.0.0.1:{port}", retries=0) as client:
        exc = await _raised(lambda: client.request("POST", "/v1/verify", Out))
    outage = classify(exc, _services(port))
    assert outage is not None and outage.dependency == "verifier"
    assert "ConnectError" in outage.error and "\n" not in outage.error


async def test_raw_httpx_connect_error_names_the_dependency_by_host_and_port() -> None:
    port = free_port()
    async with httpx.AsyncClient() as client:
        exc = await _raised(lambda: client.get(f"http://127.0.0.1:{port}/x"))
    assert isinstance(exc, httpx.ConnectError)
    assert classify(exc, _services(port)) == Outage("verifier", one_line(exc))
    # A host no setting names is reported as host:port.
    assert classify(exc, ServiceUrls()) == Outage(f"127.0.0.1:{port}", one_line(exc))


@pytest.fixture
async def silent_server() -> AsyncIterator[tuple[int, list[asyncio.StreamWriter]]]:
    """A server that accepts and never answers (writers kept open) — or hangs up, when told to."""
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writers.append(writer)

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, writers
    finally:
        for w in writers:
            w.close()
        server.close()
        await server.wait_closed()


async def test_read_timeout_is_an_outage(silent_server: tuple[int, list[asyncio.StreamWriter]]) -> None:
    port, _ = silent_server
    async with httpx.AsyncClient(timeout=0.3) as client:
        exc = await _raised(lambda: client.get(f"http://127.0.0.1:{port}/x"))
    assert isinstance(exc, httpx.ReadTimeout)
    assert classify(exc, _services(port)) == Outage("verifier", one_line(exc))


async def test_a_server_that_hangs_up_is_an_outage() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient() as client:
            exc = await _raised(lambda: client.get(f"http://127.0.0.1:{port}/x"))
    finally:
        server.close()
        await server.wait_closed()
    assert isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError))
    outage = classify(exc, _services(port))
    assert outage is not None and outage.dependency == "verifier"


def _answering(status: int, body: bytes) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status, content=body))


def _envelope(type_: str, code: str | None = None) -> bytes:
    return ErrorEnvelope(error=ErrorBody(message="m", type=type_, code=code)).model_dump_json().encode()


@pytest.mark.parametrize("status", [502, 503, 504])
async def test_5xx_that_means_not_now_is_an_outage(status: int) -> None:
    async with ServiceClient("http://cur:8003", transport=_answering(status, b"<html>bad gateway</html>")) as c:
        exc = await _raised(lambda: c.request("POST", "/v1/score", Out))
    outage = classify(exc, _services(1))
    assert outage is not None and outage.dependency == "curriculum"


@pytest.mark.parametrize("status", [400, 404, 409, 422, 500])
async def test_4xx_and_a_plain_500_are_failures(status: int) -> None:
    async with ServiceClient("http://cur:8003", transport=_answering(status, _envelope("x"))) as c:
        exc = await _raised(lambda: c.request("POST", "/v1/score", Out))
    assert isinstance(exc, ApiError) and exc.status_code == status
    assert classify(exc, _services(1)) is None


async def test_a_bad_payload_is_a_failure() -> None:
    async with ServiceClient("http://cur:8003", transport=_answering(200, b'{"value": "many"}')) as c:
        exc = await _raised(lambda: c.request("GET", "/v1/x", Out))
    assert isinstance(exc, ApiError) and exc.type == "invalid_response_error"
    assert classify(exc, _services(1)) is None


async def test_the_simulators_503_for_its_model_names_the_model_server() -> None:
    # Embedded clients call "http://simulator" (no setting names it): the client's own name is used, except when
    # the simulator says not one request reached its model.
    body = _envelope("service_unavailable_error", code="generation_failed")
    async with SimulatorClient("http://simulator", transport=_answering(503, body)) as c:
        exc = await _raised(lambda: c.request("POST", "/v1/generate", Out))
    model = classify(exc, ServiceUrls())
    assert model is not None and model.dependency == "simulator_model" and model.model_server
    async with SimulatorClient("http://simulator", transport=_answering(503, _envelope("x"))) as c:
        exc = await _raised(lambda: c.request("POST", "/v1/generate", Out))
    service = classify(exc, ServiceUrls())
    assert service is not None and service.dependency == "simulator" and not service.model_server


async def test_an_adapter_publish_to_a_server_that_is_away_is_an_outage_of_that_model_server() -> None:
    port = free_port()
    server = VLLMAdapterServer(f"http://127.0.0.1:{port}")
    try:
        exc = await _raised(lambda: server.load_adapter("a", "/p"))
    finally:
        await server.aclose()
    assert isinstance(exc, AdapterPublishError)
    same = ServiceUrls(vllm_agent=f"http://127.0.0.1:{port}", vllm_simulator=f"http://127.0.0.1:{port}/")
    outage = classify(exc, same)
    assert outage is not None and outage.dependency == "model" and outage.model_server
    agent_only = ServiceUrls(vllm_agent=f"http://127.0.0.1:{port}/v1")
    assert classify(exc, agent_only) == Outage("agent_model", one_line(exc))


async def test_an_adapter_the_server_refuses_is_a_failure() -> None:
    server = VLLMAdapterServer("http://vllm:8000", transport=_answering(400, b'{"error": {"message": "no path"}}'))
    try:
        exc = await _raised(lambda: server.load_adapter("a", "/missing"))
    finally:
        await server.aclose()
    assert isinstance(exc, AdapterPublishError) and classify(exc, _services(1)) is None


def test_inference_errors_follow_their_cause() -> None:
    request = httpx.Request("POST", "http://vllm:8000/v1/chat/completions")
    try:
        try:
            raise httpx.ConnectError("refused", request=request)
        except httpx.ConnectError as cause:
            raise InferenceError("cannot connect to http://vllm:8000") from cause
    except InferenceError as exc:
        assert classify(exc, _services(1)) == Outage("agent_model", one_line(exc))
    assert classify(InferenceError("the server returned 3 choices, asked 4"), _services(1)) is None


def test_postgres_on_a_closed_port_is_a_database_outage() -> None:
    engine = create_engine(f"postgresql+psycopg://genenv@127.0.0.1:{free_port()}/genenv?connect_timeout=2")
    try:
        with pytest.raises(OperationalError) as info:
            engine.connect()
    finally:
        engine.dispose()
    assert classify(info.value, ServiceUrls()) == Outage("database", one_line(info.value))


def test_sqlite_bug_is_a_failure_and_a_lock_is_an_outage(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'db.sqlite'}", connect_args={"timeout": 0})
    holder = sqlite3.connect(tmp_path / "db.sqlite", isolation_level=None)
    try:
        with pytest.raises(OperationalError) as missing, engine.connect() as conn:
            conn.execute(text("SELECT * FROM no_such_table"))
        assert classify(missing.value, ServiceUrls()) is None
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(OperationalError) as locked, engine.connect() as conn:
            conn.execute(text("CREATE TABLE t (x INTEGER)"))
        assert classify(locked.value, ServiceUrls()) == Outage("database", one_line(locked.value))
    finally:
        holder.close()
        engine.dispose()


def test_redis_and_kombu_on_a_closed_port_are_broker_outages() -> None:
    port = free_port()
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1)
    try:
        with pytest.raises(redis.ConnectionError) as info:
            client.ping()
    finally:
        client.close()
    assert classify(info.value, ServiceUrls()) == Outage("broker", one_line(info.value))
    with Connection(f"redis://127.0.0.1:{port}/0", connect_timeout=1) as conn:
        try:
            conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0)
        except Exception as exc:
            kombu_exc: BaseException = exc
        else:
            raise AssertionError("kombu connected to a closed port")
    outage = classify(kombu_exc, ServiceUrls())
    assert outage is not None and outage.dependency == "broker"


def test_bugs_are_failures() -> None:
    try:
        Out.model_validate({"value": "x"})
    except ValidationError as exc:
        assert classify(exc, ServiceUrls()) is None
    for exc in (ValueError("bad"), KeyError("k"), RuntimeError("rollout stored 3 of 4 attempts"), TimeoutError()):
        assert classify(exc, ServiceUrls()) is None
    assert classify(ConnectionResetError("reset by peer"), ServiceUrls()) == Outage(
        "service", "ConnectionResetError: reset by peer")


def test_dependency_of_url() -> None:
    urls = ServiceUrls(verifier="http://verifier:8002", vllm_agent="http://vllm:8000/v1", vllm_simulator="")
    assert dependency_of_url("http://verifier:8002/v1/verify", urls) == "verifier"
    assert dependency_of_url("http://vllm:8000/v1/models", urls) == "agent_model"
    assert dependency_of_url("http://elsewhere:1/", urls) is None
    assert dependency_of_url("not a url", urls) is None
