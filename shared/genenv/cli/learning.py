"""``genenv experiment learning report | calibration``: the learning experiment's analysis across experiment files
(issue 35; docs/experiments/preregistration-learning.md).

The arms of the learning experiment are members of several experiments (one per file, or per file and replicate),
possibly in several embedded homes. ``report`` reads them all (--home, repeatable, or --db URLs), pairs them by
replicate seed and writes the pre-registered arm-level report (genenv.experiments.learning); ``calibration`` reads
the calibration's runs and prints the dose table, the chosen dose and Part B's sizing
(genenv.experiments.learning_calibration). Reading: genenv.cli.learning_store; no inference server is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from genenv.cli.common import err, out

# The analysis needs numpy and scipy (the `bench` extra): imported inside the commands, so that a missing extra ends
# in cli.main's install hint when one of them runs, never when `genenv experiment` loads.

app = typer.Typer(
    help="The learning experiment (docs/experiments/preregistration-learning.md): arms of several experiments "
    "paired by replicate seed; the agent-dose calibration.",
    no_args_is_help=True,
)

HomesOption = Annotated[
    list[Path] | None, typer.Option("--home", help="An embedded home whose genenv.db holds some of the experiments "
                                                   "(repeat for several).")]
DbsOption = Annotated[list[str] | None, typer.Option("--db", help="A database URL holding some of the experiments "
                                                                  "(repeat for several).")]
ExperimentsOption = Annotated[
    list[str] | None, typer.Option("--experiment", help="Only these experiment ids (repeat; default: every "
                                                        "experiment of the databases).")]


def _urls(homes: list[Path] | None, dbs: list[str] | None) -> list[str]:
    from genenv.cli.learning_store import StoreError, home_url

    try:
        urls = [home_url(h) for h in homes or []] + list(dbs or [])
    except StoreError as exc:
        _fail(str(exc))
    if not urls:
        _fail("name the experiments' databases with --home (repeatable) or --db")
    return urls


def _fail(message: str) -> NoReturn:
    err.print(f"error: {message}", style="red", markup=False, soft_wrap=True)
    raise typer.Exit(2)


def _ints(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated integers, got {text!r}") from None


@app.command("report")
def report(
    homes: HomesOption = None,
    dbs: DbsOption = None,
    experiments: ExperimentsOption = None,
    arms: Annotated[list[str] | None, typer.Option(
        "--arm", help="Arms analysed (repeat; default all four: genenv, static_augmentation, filter, "
                      "learning_progress).")] = None,
    seeds: Annotated[str | None, typer.Option(help="The pre-registered replicate seeds, comma-separated, in order "
                                                   "(default: Part C's sixteen).")] = None,
    out_dir: Annotated[Path, typer.Option(
        "--out", file_okay=False, help="Folder for learning-report.md, learning-report.json and the figures.")] = Path(
        "learning-report"),
) -> None:
    """Pair the learning experiment's members by replicate seed across experiments and write the pre-registered
    analysis: genenv − each baseline on final held-out accuracy with its interval over training runs, the decision,
    the manipulation checks and data efficiency."""
    from genenv.cli.learning_store import StoreError, read_all
    from genenv.experiments.learning import ARMS, REGISTERED_SEEDS, LearningDesign, PairingError, analyse_learning
    from genenv.experiments.learning_figures import write_learning_figures
    from genenv.experiments.learning_rendering import learning_json, render_learning

    chosen = tuple(arms or ARMS)
    if "genenv" not in chosen:
        raise typer.BadParameter("the arms must include genenv", param_hint="--arm")
    try:
        members = read_all(_urls(homes, dbs), experiments or [])
        registered = REGISTERED_SEEDS if seeds is None else _ints(seeds)
        result = analyse_learning(members, LearningDesign(arms=chosen, registered_seeds=registered))
    except (StoreError, PairingError) as exc:
        _fail(str(exc))
    out_dir.mkdir(parents=True, exist_ok=True)
    md = out_dir / "learning-report.md"
    md.write_text(render_learning(result), encoding="utf-8")
    (out_dir / "learning-report.json").write_text(
        json.dumps(learning_json(result), indent=2, allow_nan=False) + "\n", encoding="utf-8")
    curriculum = members[0].config.curriculum  # every arm's (the pairing refuses other held-out settings, not this)
    figures = write_learning_figures(result, out_dir, alpha=curriculum.alpha, k_min=curriculum.k_min)
    for c in result.contrasts:
        iv = "–" if (i := c.interval) is None else f"{i.estimate:+.3f} [{i.low:+.3f}, {i.high:+.3f}]"
        out.print(f"genenv − {c.baseline}: {iv} over {len(c.differences)} replicate(s): {c.decision}", markup=False,
                  soft_wrap=True)
    for check in result.checks:
        out.print(f"check failed: {check}", style="yellow", markup=False, soft_wrap=True)
    out.print(f"wrote {md} and {', '.join(p.name for p in figures) or 'no figure'}", markup=False, soft_wrap=True)


@app.command("calibration")
def calibration(
    homes: HomesOption = None,
    dbs: DbsOption = None,
    experiments: ExperimentsOption = None,
    base_accuracy: Annotated[float | None, typer.Option(min=0.0, max=1.0, help="The base agent's held-out accuracy "
                                                        "(default: the newest stored `genenv bench evaluate` of the "
                                                        "held-out split in the databases).")] = None,
    base_valid_share: Annotated[float | None, typer.Option(
        min=0.0, max=1.0, help="The base agent's reply validity, 1 − malformed / n (with --base-accuracy).")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", file_okay=False, help="Also write calibration.md, "
                                                                                "calibration.json and calibration.png "
                                                                                "here.")] = None,
) -> None:
    """Print the calibration's dose table, the dose the pre-registered rule chooses, and Part B's sizing."""
    from genenv.cli.learning_store import StoreError, read_all, read_base
    from genenv.experiments.agent_calibration import BaseOutcome
    from genenv.experiments.learning import PairingError
    from genenv.experiments.learning_calibration import calibrate
    from genenv.experiments.learning_figures import write_calibration_figure
    from genenv.experiments.learning_rendering import calibration_json, render_calibration

    if (base_accuracy is None) != (base_valid_share is None):
        raise typer.BadParameter("give both --base-accuracy and --base-valid-share, or neither")
    urls = _urls(homes, dbs)
    try:
        members = read_all(urls, experiments or [])
        if not members:
            raise StoreError("no calibration runs in the databases")
        heldout = members[0].heldout
        if base_accuracy is not None and base_valid_share is not None:
            base: BaseOutcome | None = BaseOutcome(base_accuracy, base_valid_share)
        elif heldout.benchmark is None or heldout.split is None:
            raise StoreError("the calibration runs evaluate no held-out benchmark")
        else:
            base = read_base(urls, heldout.benchmark, heldout.split)
        if base is None:
            raise StoreError(f"no base-agent evaluation of {heldout.benchmark} {heldout.split} is stored; run "
                             f"`genenv bench evaluate {heldout.benchmark} --split {heldout.split}` on the same "
                             "database, or give --base-accuracy and --base-valid-share")
        result = calibrate(members, base)
    except (StoreError, PairingError) as exc:
        _fail(str(exc))
    text = render_calibration(result)
    out.print(text, markup=False, soft_wrap=True)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "calibration.md").write_text(text, encoding="utf-8")
        (out_dir / "calibration.json").write_text(
            json.dumps(calibration_json(result), indent=2, allow_nan=False) + "\n", encoding="utf-8")
        write_calibration_figure(result, out_dir)
