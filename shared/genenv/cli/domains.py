"""``genenv domains check | add | list``: built-in, plug-in and data-defined task domains."""

from __future__ import annotations

import contextlib
import enum
import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from genenv import catalogue
from genenv.catalogue import domain_store
from genenv.cli.common import JsonOption, UrlOption, control_plane_url, err, out, run_client
from genenv.contracts.domains import DATA_KINDS, DOMAIN_NAME_PATTERN
from genenv.settings import GenEnvSettings, get_settings


def _store_settings(settings: GenEnvSettings, store: Path) -> GenEnvSettings:
    return settings.model_copy(update={"database": settings.database.model_copy(update={"url": f"sqlite:///{store}"})})


@contextlib.contextmanager
def _target(url: str | None, *, write: bool) -> Iterator[tuple[GenEnvSettings, str | None]]:
    """The control plane to talk to: the given/configured URL, else the embedded domain store in the user's GenEnv
    home (created only to ``write``: a listing without a store lists the built-ins from a throwaway database)."""
    settings = get_settings()
    if control_plane_url(settings, url) != "inprocess":
        yield settings, url
        return
    store = domain_store(settings).resolve()
    if write:
        store.parent.mkdir(parents=True, exist_ok=True)
    if write or store.is_file():
        yield _store_settings(settings, store), "inprocess"
        return
    with tempfile.TemporaryDirectory(prefix="genenv-domains-") as empty:
        yield _store_settings(settings, Path(empty) / "domains.db"), "inprocess"


def stored_domain_names(store: Path) -> list[str]:
    """Names of the data-defined domains in the embedded store (none when the file does not exist)."""
    return catalogue.stored_names(f"sqlite:///{store.resolve()}")


def unknown_domain_message(name: str, store: Path) -> str | None:
    """None when ``name`` is a built-in, a working plug-in or a data-defined domain in ``store``; else one line
    naming what is known and how to add a domain."""
    data = stored_domain_names(store)
    if catalogue.is_static(name) or name in data:
        return None
    known = ", ".join([*catalogue.names(), *data])
    return (f"unknown domain {name!r}: known are {known}; register your own with `genenv domains add NAME "
            f"FILE --kind KIND` (stored in {store})")


def require_known_domain(name: str, store: Path) -> None:
    """Exit 2 with unknown_domain_message when ``name`` is no domain this machine knows."""
    message = unknown_domain_message(name, store)
    if message is not None:
        err.print(f"error: {message}", style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2)


def carry_data_domain(store: Path, settings: GenEnvSettings, name: str) -> None:
    """Copy the data-defined domain ``name`` from the user's domain ``store`` into an embedded home's database
    (nothing for a built-in or plug-in domain; the run's own 404 names a domain that is in neither)."""
    if catalogue.is_static(name) or not store.is_file():
        return
    body = catalogue.stored_body(f"sqlite:///{store.resolve()}", name)
    if body is None:
        return
    from genenv.db.engine import make_engine, make_session_factory, session_scope
    from genenv.db.migrate import upgrade

    upgrade(settings.database.url)
    target = make_engine(settings.database)
    try:
        with session_scope(make_session_factory(target)) as s:
            catalogue.add(s, body, max_bytes=len(body.content.encode()) + 1)
    finally:
        target.dispose()


def name_problem(name: str) -> str | None:
    """None for a valid domain name; else one line naming the rule and, where one exists, the valid form."""
    if re.fullmatch(DOMAIN_NAME_PATTERN, name):
        return None
    fixed = re.sub(r"[^a-z0-9_]", "_", name.lower())
    hint = f"; try {fixed!r}" if re.fullmatch(DOMAIN_NAME_PATTERN, fixed) else ""
    return (f"domain name {name!r} is not allowed: use lower-case letters, digits and _, 2-48 characters, starting "
            f"with a letter ({DOMAIN_NAME_PATTERN}){hint}")


KindOption = Annotated[str, typer.Option("--kind", help=f"{', '.join(DATA_KINDS[:-1])} or {DATA_KINDS[-1]}.")]
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
        err.print(f"cannot read {path}: {exc.strerror or exc}", style="red", markup=False, soft_wrap=True)
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
        err.print(f"error: {exc}", style="red", markup=False, soft_wrap=True)
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
    url: UrlOption = None,
) -> None:
    """Check and register a data-defined domain (embedded: in domains.db of your GenEnv home, ~/.genenv unless
    GENENV_PATHS__HOME, which `genenv quickstart --domain NAME` and `genenv experiment run` read; with a control
    plane (--url or GENENV_URL): POST /v1/domains)."""
    from pydantic import ValidationError

    from genenv.contracts.domains import DomainCreate

    bad_name = name_problem(name)
    if bad_name is not None:
        err.print(f"error: {bad_name}", style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2)
    raw = _read(file)
    try:
        content = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        err.print(f"error: {file} is not UTF-8 text: {exc.reason} at byte {exc.start}", style="red", markup=False,
                  soft_wrap=True)
        raise typer.Exit(2) from None
    try:
        body = DomainCreate.model_validate({"name": name, "kind": kind, "content": content,
                                            "options": _options(kind, normalize)})
    except ValidationError as exc:
        for e in exc.errors():
            where = ".".join(str(p) for p in e["loc"]) or "domain"
            err.print(f"error: {where}: {e['msg']}", style="red", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None
    with _target(url, write=True) as (settings, target):
        info = run_client(settings, target, lambda client: client.create_domain(body))
    typer.echo(f"registered {info.name} ({info.kind}): {info.train_rows} train rows, {info.eval_rows} eval rows")


@app.command("list")
def list_(url: UrlOption = None, as_json: JsonOption = False) -> None:
    """Built-in, plug-in (failed ones with their reason) and data-defined domains."""
    with _target(url, write=False) as (settings, target):
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
    """List a domain's seed ids (found in-process: built-ins, plug-ins, and data-defined domains in your GenEnv
    home's store, paths.home/domains.db, or the configured database)."""
    from genenv.catalogue import UnknownDomainError

    settings = get_settings()
    try:
        found = catalogue.get_domain(name, settings=settings).load_seeds(settings.paths.benchmarks, split.value)
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
