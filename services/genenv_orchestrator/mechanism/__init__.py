"""The simulator-mechanism experiments' driver (``genenv experiment mechanism …``): the base model writing and
attempting tasks, the project's RWR update trained offline, every phase cached. Its numbers are computed by the
pure genenv.experiments.mechanism and genenv.experiments.mechanism_pools; docs/experiments/preregistration.md fixes
the designs."""
