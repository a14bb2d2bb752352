"""Write the calibration's nine experiment files (docs/experiments/preregistration-learning.md, Part A) into a
folder, in the order run.sh runs them, and print their paths one per line.

    python docs/experiments/learning-calibration/grid.py OUT_DIR

The nine are genenv.experiments.agent_calibration.calibration_grid of examples/experiment-cpu-learning-calibration.yaml
over the pre-registered grid. Order (not fixed by the pre-registration, chosen before any run): fewest steps first,
then the lowest learning rate — the rule's own preference — so that a calibration cut short by a session's end has
its cheapest doses whole.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

# run.sh runs this under the code pinned at efaa1a2, which predates genenv.cli.experiments.write_experiment_files
# (Part C's plan.py uses it): so the few lines that write the files stay here, as they were when the calibration began.
from genenv.cli.experiments import load_experiment
from genenv.experiments.agent_calibration import calibration_grid

ROOT = Path(__file__).resolve().parents[3]
RATES = [5e-5, 1e-4, 2e-4]
STEPS = [1, 2, 4]


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    grid = calibration_grid(load_experiment(ROOT / "examples/experiment-cpu-learning-calibration.yaml"), RATES, STEPS)
    ordered = sorted(grid, key=lambda e: (e.template.agent.max_steps_per_epoch, e.template.agent.learning_rate))
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for i, body in enumerate(ordered, 1):
        path = out / f"{i}-{body.name}.yaml"
        path.write_text(yaml.safe_dump(body.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
        print(path)


if __name__ == "__main__":
    main()
