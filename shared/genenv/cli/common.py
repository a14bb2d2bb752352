"""What several command groups share: the consoles, the control-plane and --home options, the one door to the
control plane (``run_client``, which also resolves GENENV_URL / GENENV_TOKEN), the embedded settings and the
embedded domain store."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, TypeVar

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

URL_ENV = "GENENV_URL"
TOKEN_ENV = "GENENV_TOKEN"  # noqa: S105 - the variable's name, not a token
"""The CLI's names for the control plane and its bearer token: what `genenv up` prints and docs/api.md's examples
export. The settings' own names (GENENV_SERVICES__CONTROL_PLANE, GENENV_AUTH__CLIENT_TOKEN) stay aliases: the
services and workers read those, and a shell holding either works."""

NO_EXECUTOR_HINT = (
    "no control plane configured: set GENENV_URL (see `genenv up`) or use `genenv quickstart`; in-process, nothing "
    "would execute the run"
)

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="Control-plane base URL (default $GENENV_URL; 'inprocess' = this process, on the configured database).",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
HomeOption = Annotated[
    Path | None,
    typer.Option(
        "--home",
        file_okay=False,
        help="Read the embedded database under this folder (HOME/genenv.db, as written by `genenv quickstart "
        "--home` or `genenv experiment run --home`) in this process instead of asking a control plane.",
    ),
]


def control_plane_url(settings: GenEnvSettings, url: str | None) -> str:
    """--url, else GENENV_URL, else the settings' services.control_plane ('inprocess' by default)."""
    return url or os.environ.get(URL_ENV) or settings.services.control_plane


def client_token(settings: GenEnvSettings) -> str | None:
    """GENENV_TOKEN, else the settings' auth.client_token."""
    token = os.environ.get(TOKEN_ENV)
    if token:
        return token
    return settings.auth.client_token.get_secret_value() if settings.auth.client_token else None


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


def home_database(home: Path) -> Path:
    """``home``'s embedded database, or exit 2 with one line when there is none (nothing is created)."""
    db = home / "genenv.db"
    if not db.is_file():
        err.print(f"error: no GenEnv database in {home} (expected {db})", style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    return db


def read_target(home: Path | None, url: str | None) -> tuple[GenEnvSettings, str | None]:
    """Settings and control-plane URL of a command that reads runs: ``home``'s embedded database in this process
    when given, else the configured control plane."""
    if home is None:
        return get_settings(), url
    if url is not None:
        err.print("error: --home and --url name two different places; give one", style="red", markup=False,
                  soft_wrap=True)
        raise typer.Exit(2)
    home_database(home)
    return embedded_settings(home.resolve()), "inprocess"


def require_executor(settings: GenEnvSettings, url: str | None) -> None:
    """Exit 2 with a hint when ``url`` resolves to this process and the queue is eager: nothing here would execute
    a started run (it would stay 'running' for good). With the queue on Redis, workers pick the run up."""
    if control_plane_url(settings, url) == "inprocess" and settings.queue.eager:
        err.print(f"error: {NO_EXECUTOR_HINT}", style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2)


def run_client(settings: GenEnvSettings, url: str | None, call: Callable[[ControlPlaneClient], Awaitable[R]]) -> R:
    """Call the control plane once: over HTTP, or in-process on the configured database."""
    base = control_plane_url(settings, url)
    token = client_token(settings)

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
        err.print(f"error{where}: {exc.message}", style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2 if exc.status_code is not None and exc.status_code < 500 else 1) from exc
