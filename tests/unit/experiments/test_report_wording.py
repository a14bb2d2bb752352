"""What the report's help and figure captions say about its intervals is what genenv.experiments.stats computes:
Student-t intervals over replicates, not bootstrap ones."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from genenv.cli.main import app
from genenv.experiments.analysis import Settings as AnalysisSettings
from genenv.experiments.stats import mean_ci


def test_the_intervals_are_t_intervals() -> None:
    interval = mean_ci([1.0, 2.0, 3.0], 0.95)
    # t(0.975, df 2) = 4.3027; s = 1; n = 3: a bootstrap of three values could never leave [1, 3].
    assert interval.low == pytest.approx(2.0 - 4.302653 / 3**0.5, abs=1e-5) and interval.low < 1.0
    assert AnalysisSettings().method == "t"


def test_report_help_says_t_intervals() -> None:
    result = CliRunner().invoke(app, ["experiment", "report", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "t intervals" in result.output and "bootstrap" not in result.output


def test_figure_caption_says_t_interval() -> None:
    pytest.importorskip("matplotlib", reason="matplotlib comes with the `bench` extra")
    from genenv.experiments.figures import _caption

    series: Any = SimpleNamespace(name="e", domain="arithmetic", alpha=0.5, k_min=0.1)
    result: Any = SimpleNamespace(settings=AnalysisSettings())
    caption = _caption(series, result)
    assert caption.endswith("mean and 95% t interval over replicates") and "bootstrap" not in caption
