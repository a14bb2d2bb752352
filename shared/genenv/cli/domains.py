"""``genenv domains check | add | list``: built-in, plug-in and data-defined task domains."""

from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from genenv.cli.common import JsonOption, err, out, run_client
from genenv.settings import GenEnvSettings, get_settings

FOLDER_STORE = Path(".genenv") / "domains.db"
"""Where ``genenv domains add`` keeps data-defined domains in embedded mode: a SQLite file in the current folder,
read by the embedded commands run afterwards from that folder (quickstart, experiment run), whose own databases
are emptied at each start."""


def _target(url: str | None) -> tuple[GenEnvSettings, str | None]:
    """The control plane to talk to: the given/configured URL, else the folder's embedded domain store."""
    settings = get_settings()
    if (url or settings.services.control_plane) != "inprocess":
        return settings, url
    store = FOLDER_STORE.resolve()
    store.parent.mkdir(parents=True, exist_ok=True)
    return settings.model_copy(update={"database": settings.database.model_copy(
        update={"url": f"sqlite:///{store}"})}), "inprocess"


def carry_data_domain(settings: GenEnvSettings, name: str) -> None:
    """Copy the data-defined domain ``name`` from this folder's store into an embedded home's database (nothing
    for a built-in or plug-in domain; the run's own 404 names a domain that is in neither)."""
    from genenv.domains import REGISTRY

    if REGISTRY.is_static(name) or not FOLDER_STORE.is_file():
        return
    from genenv.contracts.domains import DomainCreate
    from genenv.db.engine import make_engine, make_session_factory, session_scope
    from genenv.db.migrate import upgrade
    from genenv.db.models import DataDomainRow
    from genenv.db.repositories import domains

    source = make_engine(settings.database.model_copy(update={"url": f"sqlite:///{FOLDER_STORE.resolve()}"}))
    try:
        with make_session_factory(source)() as s:
            row = s.get(DataDomainRow, name)
            body = None if row is None else DomainCreate(name=row.name, kind=row.kind,  # type: ignore[arg-type]
                                                         content=row.content, options=dict(row.options))
    finally:
        source.dispose()
    if body is None:
        return
    upgrade(settings.database.url)
    target = make_engine(settings.database)
    try:
        with session_scope(make_session_factory(target)) as s:
            domains.add(s, body, max_bytes=len(body.content.encode()) + 1)
    finally:
        target.dispose()


KindOption = Annotated[str, typer.Option("--kind", help="function_calling, exact_answer or qa.")]
NormalizeOption = Annotated[
    str | None,
    typer.Option("--normalize", help="exact_answer only: number, exact or case-insensitive (default).")
]


def _options(kind: str, normalize: str | None) -> dict[str, Any]:
    if normalize is not None and kind != "exact_answer":
        err.print("--normalize applies to --kind exact_answer only", style="red")
        raise typer.Exit(2)
    return {"normalize": normalize} if normalize is not None else {}


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        err.print(f"cannot read {path}: {exc.strerror or exc}", style="red", markup=False)
        raise typer.Exit(2) from None


app = typer.Typer(
    help="Task domains: built-in, plug-ins (entry point genenv.domains) and data-defined ones from a seed file.",
    no_args_is_help=True,
)


@app.command("check")
def check(
    file: Annotated[Path, typer.Argument(help="Seed file: JSON Lines, one seed task per line.")],
    kind: KindOption,
    normalize: NormalizeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check a seed file without registering it: counts, split sizes and every bad row as `line N: reason`.
    Exits 1 when a row is bad."""
    from genenv.domains.data.domain import check_seed_file

    settings = get_settings()
    try:
        _, report = check_seed_file(file.stem.lower() or "domain", kind, _read(file), _options(kind, normalize),
                                    max_bytes=settings.domains.max_seed_file_bytes)
    except ValueError as exc:
        err.print(f"error: {exc}", style="red", markup=False)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps({"kind": kind, "rows": report.rows, "train": len(report.train),
                               "eval": len(report.eval), "bad_rows": report.error_count,
                               "errors": [str(e) for e in report.errors]}, indent=2))
    else:
        for e in report.errors:
            typer.echo(str(e))
        if report.error_count > len(report.errors):
            typer.echo(f"... and {report.error_count - len(report.errors)} more")
        typer.echo(f"{file}: {report.summary()}")
    raise typer.Exit(0 if report.ok else 1)


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="Domain name (lower-case letters, digits, _), used as `domain`.")],
    file: Annotated[Path, typer.Argument(help="Seed file: JSON Lines, one seed task per line.")],
    kind: KindOption,
    normalize: NormalizeOption = None,
    url: Annotated[str | None, typer.Option("--url", help="Control-plane URL (default "
                                             "GENENV_SERVICES__CONTROL_PLANE; 'inprocess' = the local database)."
                                             )] = None,
) -> None:
    """Check and register a data-defined domain (embedded: in .genenv/domains.db of this folder, which
    `genenv quickstart --domain NAME` and `genenv experiment run` read; with --url: POST /v1/domains)."""
    from pydantic import ValidationError

    from genenv.contracts.domains import DomainCreate

    raw = _read(file)
    try:
        body = DomainCreate.model_validate({"name": name, "kind": kind, "content": raw.decode("utf-8"),
                                            "options": _options(kind, normalize)})
    except (ValidationError, UnicodeDecodeError) as exc:
        err.print(f"error: {exc}", style="red", markup=False)
        raise typer.Exit(2) from None
    settings, target = _target(url)
    info = run_client(settings, target, lambda client: client.create_domain(body))
    typer.echo(f"registered {info.name} ({info.kind}): {info.train_rows} train rows, {info.eval_rows} eval rows")


@app.command("list")
def list_(
    url: Annotated[str | None, typer.Option("--url", help="Control-plane URL (default "
                                             "GENENV_SERVICES__CONTROL_PLANE).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Built-in, plug-in (failed ones with their reason) and data-defined domains."""
    settings, target = _target(url)
    listing = run_client(settings, target, lambda client: client.list_domains())
    if as_json:
        typer.echo(listing.model_dump_json(indent=2))
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("name", "source", "status", "kind", "train", "eval", "origin / reason"):
        table.add_column(column, overflow="fold")
    for d in listing.items:
        table.add_row(d.name, d.source, "ok" if d.ok else "failed", d.kind or "",
                      "" if d.train_rows is None else str(d.train_rows),
                      "" if d.eval_rows is None else str(d.eval_rows), d.origin if d.ok else d.reason or "")
    out.print(table)


class SeedSplit(enum.StrEnum):
    """The splits a domain's seeds come in."""

    TRAIN = "train"
    EVAL = "eval"


@app.command("seeds")
def seeds(
    name: Annotated[str, typer.Argument(help="Domain name: built-in, plug-in or data-defined.")],
    split: Annotated[SeedSplit, typer.Option("--split", help="train (shown to the simulator; what seed_ids "
                                             "name) or eval (held out).", case_sensitive=False)] = SeedSplit.TRAIN,
    as_json: JsonOption = False,
) -> None:
    """List a domain's seed ids (found in-process: built-ins, plug-ins, and data-defined domains in this folder's
    store or the configured database)."""
    from genenv.catalogue import get_domain
    from genenv.domains import UnknownDomainError

    settings = get_settings()
    try:
        found = get_domain(name, settings=settings).load_seeds(settings.paths.benchmarks, split.value)
    except UnknownDomainError as exc:
        err.print(f"error: {exc}", style="red", markup=False)
        raise typer.Exit(2) from None
    except (OSError, ValueError) as exc:  # a built-in whose benchmark data is not fetched yet
        err.print(f"error: {exc} (genenv data fetch)", style="red", markup=False)
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps({"domain": name, "split": split.value, "seed_ids": [s.id for s in found]}, indent=2))
        return
    for seed in found:
        typer.echo(seed.id)
    err.print(f"{len(found)} {split.value} seed(s) of {name}", markup=False)
