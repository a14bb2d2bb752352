"""``genenv worker ...``: the Celery workers (rollouts, trainer, orchestrator)."""

from __future__ import annotations

from typing import Annotated

import typer

from genenv.settings import get_settings

LoglevelOption = Annotated[str, typer.Option("--loglevel", help="Celery log level.")]

app = typer.Typer(help="Start a Celery worker (orchestrator, rollouts, trainer).", no_args_is_help=True)


@app.command("rollout")
def worker_rollout(
    concurrency: Annotated[int, typer.Option("--concurrency", help="Jobs at once (each is already concurrent).")] = 1,
    loglevel: LoglevelOption = "INFO",
    hostname: Annotated[str, typer.Option(help="Celery node name (unique per broker).")] = "rollout@%h",
) -> None:
    """Start the Celery worker of queue 'rollouts' (G attempts per task against the agent's server)."""
    from genenv.logging import setup_logging
    from genenv.preflight import require
    from genenv.queue import QUEUE_ROLLOUTS
    from genenv_rollout.tasks import create_celery

    # Threads, even for one job: a solo-pool worker does not answer pings while a job runs, so a ping-based
    # liveness probe would restart it mid-job (and late acks would redeliver the job in a loop).
    pool = "threads"
    settings = get_settings()
    setup_logging(settings.logging)
    require(settings, "rollout")
    create_celery(settings).worker_main(
        ["worker", "-Q", QUEUE_ROLLOUTS, "--pool", pool, "--concurrency", str(concurrency), "--loglevel", loglevel,
         "--hostname", hostname]
    )


@app.command("trainer")
def worker_trainer(
    loglevel: LoglevelOption = "INFO",
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


@app.command("orchestrator")
def worker_orchestrator(
    loglevel: LoglevelOption = "INFO",
    hostname: Annotated[str, typer.Option(help="Celery node name.")] = "orchestrator@%h",
    concurrency: Annotated[int, typer.Option(min=1, help="Runs advanced at once.")] = 2,
) -> None:
    """Start the orchestrator worker (queue control): advances every run through its epoch phases."""
    from genenv.logging import setup_logging
    from genenv.preflight import require
    from genenv.queue import QUEUE_CONTROL
    from genenv_orchestrator.tasks import app as celery_app

    setup_logging(get_settings().logging)
    require(get_settings(), "orchestrator")
    celery_app.worker_main(
        ["worker", "--queues", QUEUE_CONTROL, "--concurrency", str(concurrency), "--prefetch-multiplier", "1",
         "--hostname", hostname, "--loglevel", loglevel]
    )
