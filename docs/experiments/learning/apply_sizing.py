"""Part B's commit, made mechanical (docs/experiments/preregistration-learning.md): write the calibrated dose and
n_run with its seeds from the calibration's calibration.json into the three example files of Part C, changing
nothing else, and print what it set.

    python docs/experiments/learning/apply_sizing.py docs/experiments/learning-calibration/report/calibration.json

In each of examples/experiment-cpu-learning.yaml, -filter.yaml and -progress.yaml exactly four lines change:
`replicates`, `random_seeds` (the first n_run registered seeds), and the agent's `learning_rate` and
`max_steps_per_epoch` (the two lines marked "placeholder"). A file whose lines are not found once each is refused,
as is a calibration.json without a chosen dose or n_run. The edit is on the text (not a YAML round trip) so that
every comment stays; the files are then read back and checked.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from genenv.contracts.experiments import ExperimentCreate

ROOT = Path(__file__).resolve().parents[3]
FILES = ("experiment-cpu-learning.yaml", "experiment-cpu-learning-filter.yaml", "experiment-cpu-learning-progress.yaml")
# (what a line must match, exactly once per file) → its replacement; the agent's two lines are the "placeholder" ones
# (the simulator block has its own learning_rate and max_steps_per_epoch, which stay).
_REPLICATES = re.compile(r"^replicates: .*$", re.M)
_SEEDS = re.compile(r"^random_seeds: \[.*\]$", re.M)
_RATE = re.compile(r"^    learning_rate: \S+ +# placeholder: the calibrated rate$", re.M)
_STEPS = re.compile(r"^    max_steps_per_epoch: \S+ +# placeholder: the calibrated steps$", re.M)


class SizingError(ValueError):
    """A calibration result or example file this cannot apply."""


def sizing_of(calibration: dict[str, Any]) -> tuple[float, int, list[int]]:
    """(learning rate, steps per epoch, seeds) from calibration.json."""
    chosen, sizing = calibration["decision"]["chosen"], calibration["sizing"]
    if chosen is None or sizing["n_run"] is None or not sizing["seeds"]:
        raise SizingError("calibration.json has no chosen dose or no n_run: is the calibration complete?")
    if len(sizing["seeds"]) != sizing["n_run"]:
        raise SizingError(f"n_run {sizing['n_run']} but {len(sizing['seeds'])} seeds")
    return float(chosen["learning_rate"]), int(chosen["steps"]), [int(s) for s in sizing["seeds"]]


def _yaml_float(value: float) -> str:
    """A float as YAML 1.1 (PyYAML) reads it as one: a mantissa with a dot and a signed exponent ("5e-05" would be
    a string there)."""
    mantissa, exponent = f"{value:.6e}".split("e")
    mantissa = mantissa.rstrip("0")
    return f"{mantissa}0e{exponent}" if mantissa.endswith(".") else f"{mantissa}e{exponent}"


def apply(text: str, learning_rate: float, steps: int, seeds: list[int], name: str = "file") -> str:
    """The file's text with the four lines set (SizingError unless each is found exactly once)."""
    edits = (
        (_REPLICATES, f"replicates: {len(seeds)}".ljust(36) + "# Part B: n_run (the calibration's sizing)"),
        (_SEEDS, f"random_seeds: [{', '.join(map(str, seeds))}]"),
        (_RATE, f"    learning_rate: {_yaml_float(learning_rate)}".ljust(36) + "# Part B: the calibrated rate"),
        (_STEPS, f"    max_steps_per_epoch: {steps}".ljust(36) + "# Part B: the calibrated steps"),
    )
    for pattern, line in edits:
        text, count = pattern.subn(line, text)
        if count != 1:
            raise SizingError(f"{name}: {count} lines match {pattern.pattern!r} (expected exactly one)")
    body = ExperimentCreate.model_validate_json(json.dumps(yaml.safe_load(text)))  # as load_experiment reads it
    agent = body.template.agent
    if (agent.learning_rate, agent.max_steps_per_epoch, body.replicates, body.random_seeds) != (
            learning_rate, steps, len(seeds), seeds):
        raise SizingError(f"{name}: read back as lr {agent.learning_rate}, steps {agent.max_steps_per_epoch}, "
                          f"replicates {body.replicates}, seeds {body.random_seeds}")
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("calibration", type=Path, help="calibration.json of `genenv experiment learning calibration`")
    parser.add_argument("--examples", type=Path, default=ROOT / "examples", help="the folder of the three files")
    args = parser.parse_args()
    try:
        rate, steps, seeds = sizing_of(json.loads(args.calibration.read_text(encoding="utf-8")))
        texts = {name: apply((args.examples / name).read_text(encoding="utf-8"), rate, steps, seeds, name)
                 for name in FILES}
    except (SizingError, KeyError, ValueError) as exc:
        sys.exit(f"apply_sizing.py: {exc}")
    for name, text in texts.items():  # all checked before any is written
        (args.examples / name).write_text(text, encoding="utf-8")
    print(f"set agent.learning_rate {rate:g}, agent.max_steps_per_epoch {steps}, replicates {len(seeds)}, "
          f"random_seeds {seeds} in {', '.join(FILES)}")


if __name__ == "__main__":
    main()
