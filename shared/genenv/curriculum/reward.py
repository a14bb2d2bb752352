"""α-Curriculum Reward (paper Eq. 3), the band filter, RWR weights and success-rate estimators — pure functions."""

from __future__ import annotations

import math
from collections.abc import Sequence

# The band boundary is inclusive; this absorbs float rounding so that e.g. p̂ = 0.4 with α = 0.3, k_min = 0.1
# (0.4 - 0.3 = 0.10000000000000003 in binary floats) counts as on the boundary, as the definition means.
BAND_TOLERANCE = 1e-9


def success_rate(k: int, n: int) -> float | None:
    """Plain estimate p̂ = k/n (paper Eq. 2); None when there are no valid attempts."""
    _check_counts(k, n)
    return k / n if n else None


def beta_posterior_mean(k: int, n: int) -> float:
    """Posterior mean of p under a Beta(1,1) prior: (k+1)/(n+2)."""
    _check_counts(k, n)
    return (k + 1) / (n + 2)


def alpha_reward(p_hat: float, *, alpha: float = 0.5, beta: float = 20.0) -> float:
    """R_env(p̂) = exp(−β (p̂ − α)²): 1 at p̂ = α, falling with the distance from α."""
    if not 0.0 <= p_hat <= 1.0:
        raise ValueError(f"p_hat must lie in [0, 1], got {p_hat}")
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    return math.exp(-beta * (p_hat - alpha) ** 2)


def in_band(p_hat: float, *, alpha: float = 0.5, k_min: float = 0.1) -> bool:
    """Band filter: a seed batch is trained on when |p̂ − α| ≤ k_min (boundary inclusive)."""
    return abs(p_hat - alpha) <= k_min + BAND_TOLERANCE


def rwr_weights(r_envs: Sequence[float], *, rwr_lambda: float = 1.0) -> list[float]:
    """RWR weights ∝ exp(λ·R_env), normalised to mean 1 over the given batch (empty in, empty out)."""
    if not r_envs:
        return []
    top = max(r_envs)
    # Shifting by the maximum keeps exp() finite for any λ; the shift cancels in the normalisation.
    raw = [math.exp(rwr_lambda * (r - top)) for r in r_envs]
    mean = sum(raw) / len(raw)
    return [w / mean for w in raw]


def ranking_error_bound(delta_1: float, delta_2: float, n: int) -> float:
    """Paper Thm 1: P(R_env(p̂) ranks two task types wrongly) ≤ 4·exp(−(2/9)(Δ₂−Δ₁)²·n), Δ = |p − α|."""
    return min(1.0, 4.0 * math.exp(-(2.0 / 9.0) * (delta_2 - delta_1) ** 2 * n))


def _check_counts(k: int, n: int) -> None:
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 ≤ k ≤ n, got k={k}, n={n}")
