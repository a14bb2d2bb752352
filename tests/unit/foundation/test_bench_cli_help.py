"""`genenv bench evaluate --help` names every benchmark the registry has (its help is written out by hand so the
CLI starts without importing every domain; this keeps it from going stale, as it did when arithmetic was added)."""

from __future__ import annotations

from typer.testing import CliRunner

from genenv.cli.main import app
from genenv.domains.evaluators import benchmark_names


def test_evaluate_help_names_every_registered_benchmark() -> None:
    shown = CliRunner().invoke(app, ["bench", "evaluate", "--help"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.replace("│", " ").split())
    missing = [name for name in benchmark_names() if name not in text]
    assert not missing, f"missing from `genenv bench evaluate --help`: {missing}"
