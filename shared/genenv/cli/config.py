"""``genenv config check FILE``: validate a run or experiment config file and print it resolved (every default
filled in), or each problem as ``FILE:LINE:COL: field: message`` (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import yaml
from pydantic import BaseModel

from genenv.catalogue import domain_store
from genenv.cli.common import err
from genenv.cli.documents import ConfigFileError, read_document, validate_document
from genenv.contracts.experiments import ExperimentCreate
from genenv.contracts.runs import RunConfig
from genenv.settings import get_settings

app = typer.Typer(help="Config files: validate a run or experiment config and show it resolved.",
                  no_args_is_help=True)


def _fail(lines: list[str]) -> None:
    for line in lines:
        err.print(line, style="red", markup=False, soft_wrap=True)
    raise typer.Exit(2)


@app.command("check")
def check(
    file: Annotated[Path, typer.Argument(dir_okay=False, help="Run config or experiment file (YAML or JSON).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the resolved config as JSON instead of YAML.")]
    = False,
) -> None:
    """Validate FILE offline (a run config, `{config: ...}`, or an experiment with a `template`) and print the
    resolved config with every default filled in. Its domain must be a built-in, a plug-in or one registered with
    `genenv domains add`."""
    from genenv.cli.domains import unknown_domain_message

    try:
        doc = read_document(file)
        experiment = isinstance(doc.data, dict) and "template" in doc.data
        model: type[BaseModel] = ExperimentCreate if experiment else RunConfig
        resolved, prefix = validate_document(doc, model, unwrap=None if experiment else "config")
    except ConfigFileError as exc:
        _fail(exc.lines)
        return
    config = resolved.template if isinstance(resolved, ExperimentCreate) else resolved
    assert isinstance(config, RunConfig)
    unknown = unknown_domain_message(config.domain, domain_store(get_settings()))
    if unknown is not None:
        where = doc.where([*prefix, *(["template"] if experiment else []), "domain"])
        _fail([f"{where}: domain: {unknown}"])
    if as_json:
        typer.echo(resolved.model_dump_json(indent=2))
    else:
        typer.echo(yaml.safe_dump(resolved.model_dump(mode="json"), sort_keys=False, allow_unicode=True), nl=False)
    kind = "experiment" if experiment else "run config"
    err.print(f"{file}: valid {kind}", style="green", markup=False, soft_wrap=True)
