"""The epoch table users watch: rows per epoch, and a caption saying why a role was not trained."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from genenv.cli.render import epoch_table, untrained_notes
from genenv.contracts.epochs import Epoch, EpochPhase, EpochSummary


def _epoch(index: int, train_metrics: dict[str, dict[str, object]], p_hat: float = 0.3) -> Epoch:
    summary = EpochSummary(p_hat=p_hat, tasks_valid=4, agent_adapter_version=index + 1, train_metrics=train_metrics)
    return Epoch(run_id="r", index=index, phase=EpochPhase.CLOSED, summary=summary, started_at=datetime.now(UTC))


def _text(epochs: list[Epoch]) -> str:
    console = Console(width=200, record=True)
    console.print(epoch_table(epochs, alpha=0.5, k_min=0.1))
    return console.export_text()


def test_skipped_training_is_explained_under_the_table() -> None:
    epochs = [
        _epoch(0, {"train_agent": {"steps": 1}, "train_simulator": {"steps": 0, "reason": "no in-band generation"}}),
        _epoch(1, {"train_agent": {"steps": 1}, "train_simulator": {"steps": 1}}),
        _epoch(2, {"train_simulator": {"steps": 0, "reason": "kl_cap exceeded before the first step",
                                       "kl_at_stop": 0.6172}}),
    ]
    assert untrained_notes(epochs) == [
        "epoch 0: simulator not trained: no in-band generation",
        "epoch 2: simulator not trained: kl_cap exceeded before the first step (KL 0.617)",
    ]
    text = _text(epochs)
    assert "epoch 2: simulator not trained: kl_cap exceeded" in text
    assert text.count("not trained") == 2


def test_no_caption_when_every_role_trained() -> None:
    epochs = [_epoch(0, {"train_agent": {"steps": 1}, "train_simulator": {"steps": 1}})]
    assert untrained_notes(epochs) == []
    assert "not trained" not in _text(epochs)


def test_only_the_last_notes_are_kept() -> None:
    epochs = [_epoch(i, {"train_agent": {"reason": "no group with reward variance"}}) for i in range(10)]
    notes = untrained_notes(epochs, last=3)
    assert [n.split(":")[0] for n in notes] == ["epoch 7", "epoch 8", "epoch 9"]


def test_trust_region_stops_and_the_fidelity_columns_are_shown() -> None:
    summary = EpochSummary(p_hat=0.45, tasks_valid=4, malformed_responses=7, groups_with_variance_share=0.75,
                           prompts_with_stats_share=1.0, simulator_kl_capped=True,
                           train_metrics={"train_agent": {"steps": 3},
                                          "train_simulator": {"steps": 2, "early_stopped": True, "kl_at_stop": 0.61}})
    epochs = [Epoch(run_id="r", index=1, phase=EpochPhase.CLOSED, summary=summary, started_at=datetime.now(UTC))]
    assert untrained_notes(epochs) == [
        "epoch 1: simulator update stopped after 2 step(s) by the per-epoch KL cap (KL 0.610)"]
    text = _text(epochs)
    row = next(line for line in text.splitlines() if "0.45" in line)
    for cell in ("7", "0.75", "1.00", "3/2"):
        assert cell in row.split(), (cell, row)


def test_phase_table_shows_seconds_per_phase_and_rates() -> None:
    from genenv.cli.render import phase_table

    summary = EpochSummary(tasks_valid=20, tasks_rejected=4, rollouts=120,
                           phase_seconds={"generate": 4.0, "rollout": 8.0, "train": 30.0})
    epochs = [Epoch(run_id="r", index=0, phase=EpochPhase.CLOSED, summary=summary, started_at=datetime.now(UTC)),
              Epoch(run_id="r", index=1, phase=EpochPhase.ROLLOUT, started_at=datetime.now(UTC))]
    console = Console(width=200, record=True)
    console.print(phase_table(epochs))
    text = console.export_text().splitlines()
    header = next(line for line in text if "┃" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "epoch", "generate", "rollout", "train", "total", "tasks/s", "rollouts/s"]
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in text if "│" in line]
    assert rows == [["0", "4.0", "8.0", "30.0", "42", "6.0", "15.0"]]  # the unfinished epoch has no summary yet


def test_tables_on_a_piped_stdout_get_the_piped_width() -> None:
    """pytest's stdout is not a terminal, as in a log or CI: the console takes the given width, not Rich's 80."""
    import sys

    from rich.table import Table

    from genenv.cli.render import stdout_console

    assert not sys.stdout.isatty()
    console = stdout_console(200)
    table = Table(*[f"column {i}" for i in range(15)])
    table.add_row(*[f"{i / 7:.3f}" for i in range(15)])
    with console.capture() as captured:
        console.print(table)
    lines = captured.get().splitlines()
    assert console.width == 200 and len(lines) == 5  # one line per header/row: no column folded
    assert "column 14" in lines[1]
