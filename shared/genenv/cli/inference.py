"""CLI commands of the inference area: ``genenv serve vllm``, ``genenv serve simulator``, ``genenv worker rollout``."""

from __future__ import annotations

import enum
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from genenv.settings import get_settings

console = Console(stderr=True)

DEFAULT_PORTS = {"agent": 8100, "both": 8100, "simulator": 8101}


class ServeRole(enum.StrEnum):
    """Which role(s) one vLLM server serves (adapters of both roles can share one server)."""

    AGENT = "agent"
    SIMULATOR = "simulator"
    BOTH = "both"


def _model_arg(model: str | None) -> str:
    """A local folder (cache name or path) when one exists; otherwise a hub id is passed through (GPU nodes)."""
    from genenv.models.prepare import ModelNotAvailableError, resolve_model

    settings = get_settings()
    name = model or settings.inference.base_model
    try:
        return str(resolve_model(name, settings.paths.model_cache))
    except ModelNotAvailableError:
        if "/" in name and not Path(name).expanduser().exists():
            return name  # e.g. Qwen/Qwen2.5-7B-Instruct, resolved by vLLM from its own cache
        raise


def register(app: typer.Typer, serve_app: typer.Typer, worker_app: typer.Typer) -> None:
    """Attach this area's commands."""

    @serve_app.command("vllm")
    def serve_vllm(
        role: Annotated[ServeRole, typer.Option("--role", help="agent, simulator, or both on one server.")] = (
            ServeRole.BOTH
        ),
        model: Annotated[
            str | None, typer.Option("--model", help="Model folder, cache name or hub id (default: settings).")
        ] = None,
        port: Annotated[int | None, typer.Option("--port", help="Port (default 8100; simulator 8101).")] = None,
        host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
        served_model_name: Annotated[
            str | None, typer.Option("--served-model-name", help="Name of the base model (default: settings).")
        ] = None,
        max_model_len: Annotated[
            int | None,
            typer.Option("--max-model-len", help="Context length (default: the catalogue model's, else 2048)."),
        ] = None,
        max_lora_rank: Annotated[int, typer.Option("--max-lora-rank", help="Largest LoRA rank accepted.")] = 16,
        max_loras: Annotated[
            int | None, typer.Option("--max-loras", help="Adapters per batch (default: kept versions × roles + 1).")
        ] = None,
        kv_cache_gb: Annotated[int, typer.Option("--kv-cache-gb", help="CPU only: KV-cache memory in GiB.")] = 2,
        dtype: Annotated[
            str,
            typer.Option(
                "--dtype",
                help="Model dtype: auto (GPU: vLLM's choice; CPU: bfloat16 with AVX-512/AMX, else float32), "
                "bfloat16, float16 or float32.",
            ),
        ] = "auto",
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for /health.")] = 600.0,
        extra_arg: Annotated[
            list[str] | None,
            typer.Option("--extra-arg", help="Extra vLLM argument (repeatable), e.g. --extra-arg=--max-num-seqs=32"),
        ] = None,
    ) -> None:
        """Start a vLLM OpenAI-compatible server with runtime LoRA loading; prints when healthy."""
        from genenv.inference.launcher import LaunchError, VLLMServerConfig, default_max_loras, serve
        from genenv.models.catalogue import default_context

        settings = get_settings()
        roles = ["agent", "simulator"] if role is ServeRole.BOTH else [role.value]
        model_arg = _model_arg(model)
        try:
            cfg = VLLMServerConfig(
                model=model_arg,
                served_model_name=served_model_name or settings.inference.served_model_name,
                host=host,
                port=port or DEFAULT_PORTS[role.value],
                max_model_len=max_model_len or default_context(model_arg),
                max_lora_rank=max_lora_rank,
                max_loras=max_loras or default_max_loras(roles, settings.inference.keep_adapter_versions),
                kv_cache_space_gb=kv_cache_gb,
                dtype=dtype,
                extra_args=tuple(extra_arg or ()),
            )
        except ValueError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(2) from exc
        console.print(f"starting vLLM ({role.value}) for {cfg.model} on {cfg.url} ({'cpu' if cfg.cpu else 'gpu'})")
        started = time.monotonic()

        def ready(url: str, seconds: float) -> None:
            # One line on stdout that scripts and the CI log can grep for.
            print(f"vLLM ready: role={role.value} url={url} startup_s={time.monotonic() - started:.1f}", flush=True)

        try:
            code = serve(cfg, timeout_s=timeout, on_ready=ready)
        except LaunchError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(1) from exc
        raise typer.Exit(code)

    @serve_app.command("simulator")
    def serve_simulator(
        host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help="Port.")] = 8001,
    ) -> None:
        """Start the simulator service (live task generator) with uvicorn."""
        from genenv.http.serve import serve
        from genenv_simulator.app import create_app

        settings = get_settings()
        serve(create_app(settings), settings, host=host, port=port)

    @worker_app.command("rollout")
    def worker_rollout(
        concurrency: Annotated[
            int, typer.Option("--concurrency", help="Jobs at once (each is already concurrent).")
        ] = 1,
        loglevel: Annotated[str, typer.Option("--loglevel", help="Celery log level.")] = "INFO",
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
