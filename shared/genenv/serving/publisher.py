"""Publish LoRA adapter versions to whatever serves a role, idempotently, keeping the last K versions loaded.

The server's own list of loaded adapters is the truth (a restarted vLLM has forgotten everything); the
``served_adapter`` table records it for the control plane and is reconciled on every publish.
``build_adapter_servers`` says where each role's adapters go, from the inference settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from sqlalchemy.orm import Session, sessionmaker

from genenv.contracts.adapters import Role, adapter_name
from genenv.contracts.errors import GenEnvError
from genenv.db.engine import session_scope
from genenv.db.models import AdapterRow
from genenv.db.repositories import adapters as adapter_repo
from genenv.db.repositories import served_adapters
from genenv.inference.base import InferenceBackend
from genenv.inference.factory import InferenceConfigError, vllm_api_key, vllm_url
from genenv.inference.local import LocalBackend
from genenv.settings import GenEnvSettings


class AdapterPublishError(GenEnvError):
    """The server refused or failed to load/unload an adapter."""

    status_code = 502
    type = "adapter_publish_error"


class AdapterServer(Protocol):
    """Something that serves LoRA adapters by name: a vLLM server, or the in-process local backend."""

    @property
    def server_id(self) -> str:
        """Stable identity recorded in the served_adapter table."""
        ...

    async def load_adapter(self, name: str, path: str) -> None:
        """Make ``name`` servable from the adapter folder ``path``; raise on failure."""
        ...

    async def unload_adapter(self, name: str) -> None:
        """Stop serving ``name`` (no error when it is not loaded)."""
        ...

    async def list_adapters(self) -> set[str]:
        """Names currently served."""
        ...


class VLLMAdapterServer:
    """vLLM's runtime LoRA endpoints (needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=True on the server)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        # vLLM's --api-key guards every /v1 route, the LoRA load/unload endpoints included.
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=self._base_url, headers=headers, timeout=timeout_s, transport=transport
        )

    @property
    def server_id(self) -> str:
        """The server's base URL."""
        return self._base_url

    async def load_adapter(self, name: str, path: str) -> None:
        """POST /v1/load_lora_adapter; 'already loaded' counts as success (a concurrent publisher won)."""
        response = await self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": path})
        if response.status_code == 200:
            return
        message = _message(response)
        if response.status_code == 400 and "already been loaded" in message:
            return
        raise AdapterPublishError(
            f"vLLM at {self._base_url} could not load adapter {name!r} from {path}: "
            f"HTTP {response.status_code} {message}",
            param="path",
        )

    async def unload_adapter(self, name: str) -> None:
        """POST /v1/unload_lora_adapter; an unknown name (404) is already the wanted state."""
        response = await self._post("/v1/unload_lora_adapter", {"lora_name": name})
        if response.status_code in (200, 404):
            return
        raise AdapterPublishError(
            f"vLLM at {self._base_url} could not unload {name!r}: HTTP {response.status_code} {_message(response)}"
        )

    async def list_adapters(self) -> set[str]:
        """LoRA adapters in GET /v1/models (the entries that have a parent model)."""
        try:
            response = await self._client.get("/v1/models")
        except httpx.HTTPError as exc:
            raise AdapterPublishError(f"vLLM at {self._base_url} unreachable: {exc!r}") from exc
        if response.status_code != 200:
            raise AdapterPublishError(f"GET /v1/models at {self._base_url}: HTTP {response.status_code}")
        return {str(m["id"]) for m in response.json().get("data", []) if m.get("parent")}

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def _post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        try:
            return await self._client.post(path, json=body)
        except httpx.HTTPError as exc:
            raise AdapterPublishError(f"vLLM at {self._base_url} unreachable ({path}): {exc!r}") from exc


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300]
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, dict) and "message" in err:
        return str(err["message"])
    return response.text[:300]


@dataclass(frozen=True)
class PublishResult:
    """What one publish did."""

    name: str
    loaded: bool
    unloaded: tuple[str, ...]


def _version_of(name: str, prefix: str) -> int | None:
    tail = name.removeprefix(prefix)
    return int(tail) if name.startswith(prefix) and tail.isdigit() else None


async def publish_adapter(
    server: AdapterServer,
    session: Session,
    *,
    run_id: str,
    role: Role | str,
    version: int,
    path: str,
    keep: int,
) -> PublishResult:
    """Load an adapter version unless served already; unload this (run, role)'s versions beyond the last ``keep``."""
    # A failed load raises AdapterPublishError (the local backend's InferenceError is wrapped the same way).
    role = Role(role)
    name = adapter_name(run_id, role, version)
    server_id = server.server_id
    live = await server.list_adapters()
    loaded = False
    if name not in live:
        try:
            await server.load_adapter(name, path)
        except AdapterPublishError:
            raise
        except Exception as exc:
            raise AdapterPublishError(f"{server_id} could not load adapter {name!r} from {path}: {exc}") from exc
        live.add(name)
        loaded = True
    served_adapters.record_served(
        session, server=server_id, name=name, run_id=run_id, role=role.value, version=version, path=path
    )
    # Versions of this run and role the server holds: from the server itself and from our records.
    prefix = adapter_name(run_id, role, 0)[:-1]
    versions: dict[int, str] = {}
    for row in served_adapters.list_served(session, server_id, run_id=run_id, role=role.value):
        if row.name not in live:
            served_adapters.remove_served(session, server_id, row.name)  # the server forgot it (restart)
        else:
            versions[row.version] = row.name
    for live_name in live:
        v = _version_of(live_name, prefix)
        if v is not None:
            versions[v] = live_name
    kept = set(sorted(versions, reverse=True)[:keep]) | {version}
    unloaded: list[str] = []
    for v in sorted(set(versions) - kept):
        await server.unload_adapter(versions[v])
        served_adapters.remove_served(session, server_id, versions[v])
        unloaded.append(versions[v])
    return PublishResult(name=name, loaded=loaded, unloaded=tuple(unloaded))


class AdapterPublisher:
    """The orchestrator's publisher: each role's adapters go to the server that serves that role."""

    def __init__(
        self, session_factory: sessionmaker[Session], servers: Mapping[Role, AdapterServer], keep: int
    ) -> None:
        self._session_factory = session_factory
        self._servers = dict(servers)
        self._keep = keep

    async def publish(self, adapter: AdapterRow) -> None:
        """Publish one adapter row in its own transaction."""
        await self.publish_row(adapter)

    async def publish_row(self, adapter: AdapterRow) -> PublishResult:
        """Publish one adapter row and say what happened."""
        server = self._servers[Role(adapter.role)]
        with session_scope(self._session_factory) as session:
            return await publish_adapter(
                server,
                session,
                run_id=adapter.run_id,
                role=adapter.role,
                version=adapter.version,
                path=adapter.path,
                keep=self._keep,
            )

    async def ensure_latest(self, run_id: str, role: Role) -> str | None:
        """Publish the run's newest adapter of ``role`` unless served already; its name (None = base model)."""
        # Cheap when nothing changed (one list call); repairs a restarted server or a fresh local backend.
        with session_scope(self._session_factory) as session:
            row = adapter_repo.latest_adapter(session, run_id, role)
        if row is None:
            return None
        return (await self.publish_row(row)).name


def build_adapter_servers(
    settings: GenEnvSettings, backends: Mapping[Role, InferenceBackend]
) -> dict[Role, AdapterServer]:
    """Where each role's adapters are published: its vLLM server, or the in-process local backend itself."""
    if settings.inference.backend == "vllm":
        by_url: dict[str, VLLMAdapterServer] = {}
        out: dict[Role, AdapterServer] = {}
        for role in Role:
            url = vllm_url(settings, role)
            if url not in by_url:
                by_url[url] = VLLMAdapterServer(url, api_key=vllm_api_key(settings))
            out[role] = by_url[url]
        return out
    servers: dict[Role, AdapterServer] = {}
    for role, backend in backends.items():
        if not isinstance(backend, LocalBackend):
            raise InferenceConfigError(f"inference.backend is 'local' but the {role.value} backend is {backend!r}")
        servers[role] = backend
    return servers
