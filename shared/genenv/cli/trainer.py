"""CLI commands of the curriculum/trainer area: ``genenv serve curriculum`` and ``genenv worker trainer``."""

from __future__ import annotations

from typing import Annotated

import typer

from genenv.settings import get_settings


def register(app: typer.Typer, serve_app: typer.Typer, worker_app: typer.Typer) -> None:
    """Attach this area's commands."""

    @serve_app.command("curriculum")
    def serve_curriculum(
        host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="TCP port.")] = 8003,
    ) -> None:
        """Start the curriculum service (POST /v1/score, ledger and score queries) with uvicorn."""
        from genenv.http.serve import serve
        from genenv_curriculum.app import create_app

        settings = get_settings()
        serve(create_app(settings), settings, host=host, port=port)

    @worker_app.command("trainer")
    def worker_trainer(
        loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
        hostname: Annotated[str, typer.Option(help="Celery node name.")] = "trainer@%h",
    ) -> None:
        """Start the trainer worker: queue gpu, one job at a time (concurrency 1, prefetch 1, late acks)."""
        from genenv.logging import setup_logging
        from genenv.preflight import require
        from genenv.queue import QUEUE_GPU
        from genenv_trainer.tasks import app as celery_app

        settings = get_settings()
        setup_logging(settings.logging)
        require(settings, "trainer")
        celery_app.worker_main(
            [
                "worker",
                "--queues", QUEUE_GPU,
                "--concurrency", "1",
                "--prefetch-multiplier", "1",
                "--hostname", hostname,
                "--loglevel", loglevel,
                # Each job loads its own model; a fresh child per job returns the memory to the system.
                "--max-tasks-per-child", "1",
            ]
        )
