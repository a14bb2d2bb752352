"""Experiment reports: what a set of co-evolution runs (modes × replicates) shows, computed from ExperimentSeries.

Pure code over the wire contract (genenv.contracts.experiments) plus numpy, scipy and matplotlib: no database, no
clients, so the same numbers come out of the CLI, the control plane and the tests.

- ``stats``: bootstrap confidence intervals over replicates (the one place that decides how an interval is made);
- ``report``: the per-epoch curves, per-member summaries, effects, data efficiency, H1–H4 verdicts and the markdown;
- ``figures``: the PNG figures (matplotlib without pyplot);
- ``writer``: ``write_report`` — computes, draws and writes report.md, report.json and the figures.
"""
