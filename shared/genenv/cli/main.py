"""Entry point of the ``genenv`` command. Each area registers its commands from its own module."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="genenv",
    help="GenEnv: co-evolve an LLM agent and an LLM task simulator with the α-curriculum reward.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
serve_app = typer.Typer(help="Start one long-running process (HTTP service or vLLM server).", no_args_is_help=True)
worker_app = typer.Typer(help="Start a Celery worker (orchestrator, rollouts, trainer).", no_args_is_help=True)
app.add_typer(serve_app, name="serve")
app.add_typer(worker_app, name="worker")

# Each module defines register(app, serve_app, worker_app); kept as a list so areas never edit each other's files.
_COMMAND_MODULES = (
    "genenv.cli.db",
    "genenv.cli.runs",
    "genenv.cli.experiments",
    "genenv.cli.models",
    "genenv.cli.inference",
    "genenv.cli.verifier",
    "genenv.cli.trainer",
    "genenv.cli.orchestrator",
)
for _name in _COMMAND_MODULES:
    importlib.import_module(_name).register(app, serve_app, worker_app)


if __name__ == "__main__":
    app()
