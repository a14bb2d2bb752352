"""Write the learning experiment's run files (docs/experiments/preregistration-learning.md, Part C) into a folder,
in the pre-registered order, and print their paths one per line.

    python docs/experiments/learning/plan.py OUT_DIR

Order: replicate by replicate (so a budget that ends early leaves whole replicates); within one, the three
experiment files as the pre-registration's table lists them — experiment-cpu-learning.yaml (genenv and
static_augmentation), -filter, -progress. Each file is its example with `random_seeds: [seed_r]`, `replicates: 1`
and the replicate in its name; the seeds and their number (n_run) are the examples' own, which Part B's sizing
commit writes. The three must agree on their seeds and on planned agent attempts per epoch (else this exits).
"""

from __future__ import annotations

import sys
from pathlib import Path

from genenv.cli.experiments import load_experiment, write_experiment_files
from genenv.contracts.experiments import ExperimentCreate
from genenv.experiments.budget import check_equal_attempts
from genenv.experiments.learning import REGISTERED_SEEDS

ROOT = Path(__file__).resolve().parents[3]
FILES = ("experiment-cpu-learning.yaml", "experiment-cpu-learning-filter.yaml", "experiment-cpu-learning-progress.yaml")


def replicate_files(bodies: list[ExperimentCreate]) -> list[ExperimentCreate]:
    """Every (replicate, file) as one single-replicate experiment, replicate-major. ValueError when the files
    disagree on their seeds or their agent attempts, or use a seed the pre-registration does not list in order."""
    seeds = [list(b.random_seeds or []) for b in bodies]
    if any(s != seeds[0] for s in seeds) or not seeds[0]:
        raise ValueError(f"the experiment files' random_seeds differ or are empty: {seeds}")
    if seeds[0] != list(REGISTERED_SEEDS[:len(seeds[0])]):
        raise ValueError(f"random_seeds {seeds[0]} are not the first {len(seeds[0])} pre-registered seeds")
    check_equal_attempts({f"{b.name}:{m}": b.template.model_copy(update={"mode": m})
                          for b in bodies for m in b.modes})
    return [b.model_copy(update={"name": f"{b.name}-r{r}", "replicates": 1, "random_seeds": [seed]})
            for r, seed in enumerate(seeds[0], 1) for b in bodies]


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        planned = replicate_files([load_experiment(ROOT / "examples" / name) for name in FILES])
    except ValueError as e:
        sys.exit(f"plan.py: {e}")
    for path in write_experiment_files(Path(sys.argv[1]), planned):
        print(path)


if __name__ == "__main__":
    main()
