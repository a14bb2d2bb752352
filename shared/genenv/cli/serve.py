"""``genenv serve ...``: one long-running process. The HTTP services come from one table (``HTTP_SERVICES``:
their app factory and default port); ``serve vllm`` has options of its own."""

from __future__ import annotations

import enum
import importlib
import time
from pathlib import Path
from typing import Annotated, NamedTuple

import typer

from genenv.cli.common import err
from genenv.devstack import documented_ports
from genenv.settings import get_settings


class HttpService(NamedTuple):
    """One HTTP service: where its app comes from and its default port."""

    factory: str
    """``"module:function"``: a function taking the settings and returning the ASGI app."""
    port: int


_PORTS = documented_ports()  # 8000–8003, the ports docs/api.md, compose and Kubernetes use
HTTP_SERVICES: dict[str, HttpService] = {
    "control-plane": HttpService("genenv_control_plane.app:create_app", _PORTS["control-plane"]),
    "simulator": HttpService("genenv_simulator.app:create_app", _PORTS["simulator"]),
    "verifier": HttpService("genenv_verifier.app:create_app", _PORTS["verifier"]),
    "curriculum": HttpService("genenv_curriculum.app:create_app", _PORTS["curriculum"]),
}

HostOption = Annotated[str, typer.Option("--host", help="Interface to bind.")]

app = typer.Typer(help="Start one long-running process (HTTP service or vLLM server).", no_args_is_help=True)


def _serve_http(name: str, host: str, port: int, workers: int = 1) -> None:
    """Serve service ``name`` with uvicorn: its app in this process, or ``workers`` processes sharing the port."""
    from genenv.http.serve import serve, serve_workers

    factory = HTTP_SERVICES[name].factory
    settings = get_settings()
    if workers > 1:
        serve_workers(factory, settings, host=host, port=port, workers=workers)
        return
    module, function = factory.split(":")
    create_app = getattr(importlib.import_module(module), function)
    serve(create_app(settings), settings, host=host, port=port)


@app.command("control-plane")
def serve_control_plane(
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = HTTP_SERVICES["control-plane"].port,
    workers: Annotated[
        int,
        typer.Option(min=1, max=64, help="Server processes sharing the port (one per core the API may use)."),
    ] = 1,
    migrate: Annotated[
        bool | None,
        typer.Option("--migrate/--no-migrate", help="Upgrade the schema first (default: only on SQLite)."),
    ] = None,
) -> None:
    """Start the control-plane REST API (uvicorn)."""
    from genenv.logging import setup_logging

    settings = get_settings()
    setup_logging(settings.logging)
    if migrate if migrate is not None else settings.database.url.startswith("sqlite"):
        from genenv.db.migrate import upgrade

        upgrade(settings.database.url)
    _serve_http("control-plane", host, port, workers)


class ServeRole(enum.StrEnum):
    """Which role(s) one vLLM server serves (adapters of both roles can share one server)."""

    AGENT = "agent"
    SIMULATOR = "simulator"
    BOTH = "both"


VLLM_PORTS = {"agent": 8100, "both": 8100, "simulator": 8101}


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


@app.command("vllm")
def serve_vllm(
    role: Annotated[ServeRole, typer.Option("--role", help="agent, simulator, or both on one server.")] = (
        ServeRole.BOTH
    ),
    model: Annotated[
        str | None, typer.Option("--model", help="Model folder, cache name or hub id (default: settings).")
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port (default 8100; simulator 8101).")] = None,
    host: HostOption = "127.0.0.1",
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
            help="Model dtype: auto (the trainer's, GENENV_TRAINER__DTYPE, whose own auto is bfloat16 on CPUs with "
            "AVX-512 BF16 or AMX, else float32; on a GPU vLLM's choice), bfloat16, float16 or float32.",
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
            port=port or VLLM_PORTS[role.value],
            max_model_len=max_model_len or default_context(model_arg),
            max_lora_rank=max_lora_rank,
            max_loras=max_loras or default_max_loras(roles, settings.inference.keep_adapter_versions),
            kv_cache_space_gb=kv_cache_gb,
            # auto serves the model in the dtype it is trained in, so that the log-probs recorded at sampling are
            # the trainer's up to rounding (GRPO's importance ratio), and one setting pins both for an experiment.
            dtype=settings.trainer.dtype if dtype == "auto" else dtype,
            extra_args=tuple(extra_arg or ()),
        )
    except ValueError as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    err.print(f"starting vLLM ({role.value}) for {cfg.model} on {cfg.url} ({'cpu' if cfg.cpu else 'gpu'})")
    started = time.monotonic()

    def ready(url: str, seconds: float) -> None:
        # One line on stdout that scripts and the CI log can grep for.
        print(f"vLLM ready: role={role.value} url={url} startup_s={time.monotonic() - started:.1f}", flush=True)

    try:
        code = serve(cfg, timeout_s=timeout, on_ready=ready)
    except LaunchError as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    raise typer.Exit(code)


@app.command("simulator")
def serve_simulator(
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port.")] = HTTP_SERVICES["simulator"].port,
) -> None:
    """Start the simulator service (live task generator) with uvicorn."""
    _serve_http("simulator", host, port)


@app.command("verifier")
def serve_verifier(
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port.")] = HTTP_SERVICES["verifier"].port,
) -> None:
    """Start the verifier service (POST /v1/verify, POST /v1/benchmarks/{name}/evaluate) with uvicorn."""
    _serve_http("verifier", host, port)


@app.command("curriculum")
def serve_curriculum(
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = HTTP_SERVICES["curriculum"].port,
) -> None:
    """Start the curriculum service (POST /v1/score, ledger and score queries) with uvicorn."""
    _serve_http("curriculum", host, port)
