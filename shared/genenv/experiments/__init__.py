"""Experiment reports: what a set of co-evolution runs (modes × replicates) shows, computed from ExperimentSeries.

Pure code over the wire contract (genenv.contracts.experiments) plus numpy, scipy and matplotlib: no database, no
clients, so the same numbers come out of the CLI, the control plane and the tests.

- ``stats``: t intervals and paired tests over replicates (the one place that decides how an interval is made);
- ``series``: the ExperimentSeries from the stored rows and the domain, with the per-mode per-epoch means over
  replicates (the one aggregation the report and the dashboard share; the control plane serves it);
- ``analysis``: the per-epoch intervals, per-member summaries, effects, data efficiency and H1–H4 verdicts;
- ``rendering``: the markdown report of an analysis;
- ``figures``: the PNG figures (matplotlib without pyplot);
- ``writer``: ``write_report`` — computes, draws and writes report.md, report.json and the figures;
- ``learning``, ``learning_calibration``, ``learning_rendering``: the learning experiment's arm-level analysis across
  experiment files (members paired by replicate seed), its dose calibration and sizing, and their reports
  (docs/experiments/preregistration-learning.md; ``genenv experiment learning``).
"""
