"""``genenv bench list|evaluate``: benchmark evaluations in this process against the configured backend."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from genenv.cli.render import stdout_console
from genenv.contracts.evaluations import EvaluationMetrics
from genenv.settings import GenEnvSettings, get_settings

console = stdout_console(200)  # the benchmark tables have up to 15 columns

app = typer.Typer(help="Benchmark evaluations (arithmetic, BFCL, API-Bank, Bamboogle, ALFWorld, TravelPlanner).")


@app.command("list")
def bench_list() -> None:
    """The benchmarks, their splits and default split."""
    from genenv.domains.evaluators import benchmark_names, get_evaluator

    for name in benchmark_names():
        try:
            ev = get_evaluator(name)
        except ImportError as exc:
            console.print(f"{name}: not available ({exc})")
            continue
        console.print(f"[bold]{name}[/]: splits {', '.join(ev.splits)} (default {ev.default_split})")


@app.command("evaluate")
def bench_evaluate(
    name: Annotated[str, typer.Argument(help="Benchmark: arithmetic, bfcl, api_bank, bamboogle, alfworld, "
                                                 "travelplanner (`genenv bench list`: each with its splits).")],
    split: Annotated[str | None, typer.Option("--split", help="Split (default: the benchmark's).")] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only this many items, round-robin over categories.")
    ] = None,
    adapter: Annotated[
        str | None, typer.Option("--adapter", help="Agent adapter name as served (default: the base model).")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option("--concurrency", min=1, help="Items in flight (default: settings).")
    ] = None,
    store: Annotated[bool, typer.Option("--store/--no-store", help="Store an evaluation row.")] = True,
) -> None:
    """Run a benchmark in-process against the configured inference backend and print the table."""
    settings = get_settings()
    evaluation_id = asyncio.run(_evaluate(settings, name, split, limit, adapter, concurrency, store))
    if evaluation_id is not None:
        console.print(f"stored as evaluation {evaluation_id}")


async def _evaluate(
    settings: GenEnvSettings,
    name: str,
    split: str | None,
    limit: int | None,
    adapter: str | None,
    concurrency: int | None,
    store: bool,
) -> int | None:
    from genenv.benchmarks.base import print_report, run_evaluation
    from genenv.contracts.adapters import Role
    from genenv.domains.evaluators import get_evaluator
    from genenv.inference.factory import build_backend

    evaluator = get_evaluator(name)
    backend = build_backend(settings, Role.AGENT)
    try:
        report = await run_evaluation(
            evaluator,
            backend,
            benchmarks_dir=settings.paths.benchmarks,
            adapter=adapter,
            split=split,
            limit=limit,
            concurrency=concurrency or settings.verifier.eval_concurrency,
            console=console,
        )
    finally:
        await backend.aclose()
    print_report(report, console)
    for category, reason in EvaluationMetrics.parse(report.metrics).skipped.items():
        console.print(f"[yellow]skipped {category}[/]: {reason}")
    if not store:
        return None
    from sqlalchemy.exc import OperationalError, ProgrammingError

    from genenv.db.engine import make_engine, make_session_factory, session_scope
    from genenv.db.repositories.evaluations import create_evaluation

    engine = make_engine(settings.database)
    try:
        with session_scope(make_session_factory(engine)) as session:
            row = create_evaluation(
                session,
                benchmark=name,
                split=report.split,
                adapter=adapter,
                metrics=report.metrics,
                n_items=report.n_items,
            )
            return row.id
    except (OperationalError, ProgrammingError) as exc:
        console.print(
            f"[red]could not store the evaluation[/] ({type(exc).__name__}); run `genenv db upgrade` "
            "first, or pass --no-store"
        )
        raise typer.Exit(1) from None
    finally:
        engine.dispose()
