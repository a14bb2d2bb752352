"""genenv.experiments.sizing: the per-replicate SD of a new design from an earlier experiment's replicates."""

from __future__ import annotations

import math

import pytest

from genenv.experiments.sizing import Spread, plan, within_sd
from genenv.experiments.stats import smallest_detectable


def test_within_sd_pools_the_replicates_around_their_own_means() -> None:
    sd, m = within_sd({0: [0.0, 0.2], 1: [1.0, 1.2, 1.4]})  # a shift between replicates is not within spread
    assert sd == pytest.approx(math.sqrt((0.02 + 0.08) / 3)) and m == 2.5
    with pytest.raises(ValueError):
        within_sd({0: [0.1]})


def test_plan_separates_between_run_spread_from_pair_noise() -> None:
    # Two replicates 0.1 apart (s² = 0.005); pairs' SD 0.2 over 50 pairs (noise 0.0008): τ² = 0.0042.
    p = plan(Spread([0.0, 0.1], within_sd=0.2, pairs_per_replicate=50), pairs_per_replicate=100, replicates=[5, 8])
    assert p.between_sd == pytest.approx(math.sqrt(0.0042))
    assert p.replicate_sd == pytest.approx(math.sqrt(0.0042 + 0.0004))  # more pairs shrink only the noise part
    assert p.detectable_point[8] == pytest.approx(smallest_detectable(p.replicate_sd, 8))  # type: ignore[arg-type]
    assert p.between_sd_upper > p.between_sd and p.detectable[8] > p.detectable_point[8] > 0
    assert p.detectable[5] > p.detectable[8]
    # Replicates closer than the pairs' noise explains: no between-run spread is left.
    flat = plan(Spread([0.05, 0.051], within_sd=0.2, pairs_per_replicate=50), pairs_per_replicate=50, replicates=[5])
    assert flat.between_sd == 0.0 and flat.replicate_sd == pytest.approx(0.2 / math.sqrt(50))
