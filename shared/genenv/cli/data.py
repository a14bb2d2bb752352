"""``genenv data fetch|status``: benchmark data from the pinned upstream sources, verified."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from genenv.cli.common import err, out
from genenv.settings import get_settings

if TYPE_CHECKING:
    from genenv.data.manifest import Manifest

_DEST_HELP = "Data folder (default: settings paths.benchmarks, GENENV_PATHS__BENCHMARKS)."
_NAMES_HELP = "Benchmarks to fetch: api_bank, bamboogle, bfcl, alfworld, travelplanner, or all (default: all)."
_MANIFEST_HELP = "A manifest of your own (JSON, same schema), e.g. pointing at a mirror (default: the packaged one)."


class _Bar:
    """A rich progress bar per benchmark, in bytes."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, TaskID] = {}

    def start(self, name: str, total_bytes: int) -> None:
        self.tasks[name] = self.progress.add_task(name, total=total_bytes)

    def advance(self, name: str, n_bytes: int) -> None:
        self.progress.advance(self.tasks[name], n_bytes)

    def note(self, message: str) -> None:
        self.progress.console.log(message)


app = typer.Typer(
    help="Benchmark data: download from the pinned upstream sources, verify, and show what is present.",
    no_args_is_help=True,
)


def _manifest(path: Path | None) -> Manifest:
    from genenv.data.manifest import ManifestError, load_manifest

    try:
        return load_manifest(path)
    except ManifestError as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc


@app.command("fetch")
def fetch(
    names: Annotated[list[str] | None, typer.Argument(help=_NAMES_HELP)] = None,
    dest: Annotated[Path | None, typer.Option("--dest", help=_DEST_HELP)] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Fetch again, replacing a folder that is present or differs.")
    ] = False,
    manifest_path: Annotated[Path | None, typer.Option("--manifest", help=_MANIFEST_HELP)] = None,
) -> None:
    """Download each benchmark from its pinned source, verify every file's sha256, and install it atomically.

    A benchmark already present is left alone. On any failure (offline, HTTP error, checksum mismatch)
    nothing of that benchmark is written and the command exits 1.
    """
    from genenv.data.fetch import DataFetchError, UnknownBenchmarkDataError, fetch_one, resolve_names

    manifest = _manifest(manifest_path)
    root = (dest or get_settings().paths.benchmarks).expanduser()
    try:
        chosen = resolve_names(manifest, names or [])
    except UnknownBenchmarkDataError as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(2) from exc
    columns = (TextColumn("{task.description:<14}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())  # fmt: skip
    failed = []
    with Progress(*columns, console=err) as progress:
        bar = _Bar(progress)
        for name in chosen:
            try:
                outcome = fetch_one(name, manifest.benchmarks[name], root, force=force, reporter=bar)
            except DataFetchError as exc:
                progress.console.print(f"[red]{name}: {exc}[/red]")
                failed.append(name)
                continue
            progress.console.print(f"{name}: {outcome.action} at {outcome.folder} ({outcome.revision})")
    if failed:
        err.print(f"[red]not fetched: {', '.join(failed)}[/red]")
        raise typer.Exit(1)


@app.command("status")
def status(
    dest: Annotated[Path | None, typer.Option("--dest", help=_DEST_HELP)] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Check every file's sha256, not only its size.")] = False,
    manifest_path: Annotated[Path | None, typer.Option("--manifest", help=_MANIFEST_HELP)] = None,
) -> None:
    """What each benchmark's folder holds compared with the manifest: state, revision, files, where."""
    from genenv.data.fetch import inspect

    manifest = _manifest(manifest_path)
    root = (dest or get_settings().paths.benchmarks).expanduser()
    table = Table("benchmark", "state", "files", "MB", "revision", "licence")
    problems = []
    for name, entry in manifest.benchmarks.items():
        st = inspect(name, entry, root, verify=verify)
        state = st.state + ("" if st.fetched_at is None else f"\nfetched {st.fetched_at}")
        table.add_row(name, state, f"{st.files_ok}/{st.files_total}", f"{entry.total_bytes / 1e6:.1f}",
                      st.revision or "-", entry.licence)  # fmt: skip
        problems += [f"{name}: {p}" for p in st.problems[:3]]
    out.print(table)
    out.print(f"data folder: {root} (setting paths.benchmarks, GENENV_PATHS__BENCHMARKS)", markup=False)
    for line in problems:
        out.print(line, markup=False)
