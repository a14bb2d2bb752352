"""``genenv init``: write a commented starter run config for a domain, one that ``genenv config check`` accepts
and ``genenv runs create`` takes as it is."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import BaseModel

from genenv.catalogue import domain_store
from genenv.cli.common import err
from genenv.contracts.modes import DEFAULT_MODE
from genenv.contracts.runs import RunConfig
from genenv.settings import get_settings

# Merged into the root command: `genenv init`.
app = typer.Typer()

# The fields a first run is tuned by, in the order a reader meets them; every other field keeps its default
# (`genenv config check FILE` prints them all).
STARTER_FIELDS: tuple[str | tuple[str, tuple[str, ...]], ...] = (
    "name", "mode", "domain", "base_model", "epochs", "seeds_per_epoch", "variations_per_seed", "rollouts_per_task",
    "max_response_tokens", "max_task_tokens", "eval_every", "eval_benchmarks",
    ("curriculum", ("alpha", "k_min", "beta")),
    ("agent", ("learning_rate", "batch_size", "micro_batch_size")),
    ("simulator", ("learning_rate", "batch_size", "micro_batch_size")),
)


def _comment(text: str, indent: str) -> list[str]:
    return textwrap.wrap(text, width=110, initial_indent=f"{indent}# ", subsequent_indent=f"{indent}# ")


def _field_lines(model: BaseModel, name: str, indent: str) -> list[str]:
    info = type(model).model_fields[name]
    value: Any = getattr(model, name)
    value = value.value if hasattr(value, "value") else value
    # JSON scalars and lists are YAML flow values: strings come out quoted, numbers as written.
    return [*_comment(info.description or "", indent), f"{indent}{name}: {json.dumps(value)}"]


def starter_config(config: RunConfig) -> str:
    """``config`` as commented YAML: the starter fields, each under its field's description."""
    lines = [
        "# A GenEnv run config (genenv init). Every field not written here keeps its default:",
        "# `genenv config check FILE` prints the resolved config, docs/configuration.md describes each field.",
        "",
    ]
    for entry in STARTER_FIELDS:
        if isinstance(entry, str):
            lines += [*_field_lines(config, entry, ""), ""]
            continue
        block, names = entry
        sub: BaseModel = getattr(config, block)
        lines += [*_comment(type(sub).__doc__ or block, ""), f"{block}:"]
        for name in names:
            lines += _field_lines(sub, name, "  ")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


@app.command()
def init(
    domain: Annotated[str, typer.Option(help="Task domain: a built-in, a plug-in or one added with `genenv domains "
                                        "add`.")] = "arithmetic",
    out: Annotated[Path, typer.Option("--out", "-o", dir_okay=False, help="File to write.")] = Path("genenv-run.yaml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented starter run config (the quickstart's small CPU run) for DOMAIN."""
    from genenv.cli.domains import require_known_domain
    from genenv.cli.stacks import _quickstart_config

    require_known_domain(domain, domain_store(get_settings()))
    if out.exists() and not force:
        err.print(f"error: {out} exists; pass --force to overwrite it", style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    config = _quickstart_config(DEFAULT_MODE, domain, epochs=3, seeds=6, variations=4, rollouts=6, k_min=0.25)
    config = config.model_copy(update={"name": out.stem})
    out.write_text(starter_config(config), encoding="utf-8")
    typer.echo(f"wrote {out} (domain {domain}): check it with `genenv config check {out}`, then "
               f"`genenv runs create {out}`")
