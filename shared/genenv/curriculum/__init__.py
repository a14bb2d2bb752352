"""The α-curriculum: reward, band filter, RWR weights, estimators and agent-batch selection (pure functions)."""

from genenv.curriculum.generic import size_matched_random
from genenv.curriculum.reward import (
    BAND_TOLERANCE,
    alpha_reward,
    beta_posterior_mean,
    in_band,
    ranking_error_bound,
    rwr_weights,
    success_rate,
)
from genenv.curriculum.scoring import estimate, score_batches
from genenv.curriculum.selection import select_agent_batch

__all__ = [
    "BAND_TOLERANCE",
    "alpha_reward",
    "beta_posterior_mean",
    "estimate",
    "in_band",
    "ranking_error_bound",
    "rwr_weights",
    "score_batches",
    "select_agent_batch",
    "size_matched_random",
    "success_rate",
]
