"""What several command groups share: the consoles, the control-plane URL option, the one door to the control plane
(``run_client``), the embedded settings and reading a YAML or JSON document."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import httpx
import typer
from rich.console import Console

from genenv.cli.render import stdout_console
from genenv.clients.base import ApiError
from genenv.clients.control_plane import ControlPlaneClient
from genenv.settings import GenEnvSettings, get_settings

R = TypeVar("R")

err = Console(stderr=True)
# Logs and CI are not terminals: give tables room (run ids are 32 characters) instead of Rich's 80 columns.
out = stdout_console()

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Control-plane base URL (default GENENV_SERVICES__CONTROL_PLANE; 'inprocess' = this process, "
        "on the configured database).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def read_document(path: Path) -> Any:
    """The parsed content of a YAML (.yaml, .yml) or JSON file."""
    text = path.read_text()
    if path.suffix in {".yaml", ".yml"}:
        import yaml

        return yaml.safe_load(text)
    return json.loads(text)


def embedded_settings(home: Path) -> GenEnvSettings:
    """The embedded default under ``home``: SQLite, in-process services, eager queue, local backend."""
    base = get_settings()
    return base.model_copy(
        update={
            "database": base.database.model_copy(update={"url": f"sqlite:///{home / 'genenv.db'}"}),
            "queue": base.queue.model_copy(update={"eager": True}),
            "paths": base.paths.model_copy(update={"home": home, "adapter_store": home / "adapters"}),
        }
    )


def run_client(settings: GenEnvSettings, url: str | None, call: Callable[[ControlPlaneClient], Awaitable[R]]) -> R:
    """Call the control plane once: over HTTP, or in-process on the configured database."""
    base = url or settings.services.control_plane
    token = settings.auth.client_token.get_secret_value() if settings.auth.client_token else None

    async def go() -> R:
        if base != "inprocess":
            async with ControlPlaneClient(base, token=token) as client:
                return await call(client)
        from genenv.db.migrate import upgrade
        from genenv_control_plane.app import create_app

        if settings.database.url.startswith("sqlite"):
            upgrade(settings.database.url)  # the embedded default has nobody else to create the schema
        app = create_app(settings)
        try:
            transport = httpx.ASGITransport(app=app)
            async with ControlPlaneClient("http://control-plane", token=token, transport=transport) as client:
                return await call(client)
        finally:
            app.state.control_plane.close()

    try:
        return asyncio.run(go())
    except ApiError as exc:
        where = f" [{exc.param}]" if exc.param else ""
        err.print(f"error{where}: {exc.message}", style="red", markup=False)
        raise typer.Exit(2 if exc.status_code is not None and exc.status_code < 500 else 1) from exc
