"""Turn per-seed-batch success counts into curriculum scores (p̂, R_env, in-band flag, RWR weight)."""

from __future__ import annotations

from collections.abc import Sequence

from genenv.contracts.runs import CurriculumConfig
from genenv.contracts.scores import CurriculumScore, ScoreResponse
from genenv.curriculum.reward import alpha_reward, beta_posterior_mean, in_band, rwr_weights, success_rate


def estimate(k: int, n: int, *, use_beta_prior: bool) -> float | None:
    """The p̂ the curriculum uses: k/n or the Beta(1,1) posterior mean; None without valid attempts.

    A batch with n = 0 has no estimate even under the prior: (0+1)/(0+2) = ½ would put a batch the agent never
    validly attempted exactly at the target and into the simulator update.
    """
    if n == 0:
        return None
    return beta_posterior_mean(k, n) if use_beta_prior else success_rate(k, n)


def score_batches(counts: Sequence[tuple[str, int, int]], config: CurriculumConfig) -> ScoreResponse:
    """Score seed batches given as (seed id, k, n): R_env and band flag each; weights over in-band ones only."""
    p_hats = [estimate(k, n, use_beta_prior=config.use_beta_prior) for _, k, n in counts]
    r_envs = [None if p is None else alpha_reward(p, alpha=config.alpha, beta=config.beta) for p in p_hats]
    bands = [p is not None and in_band(p, alpha=config.alpha, k_min=config.k_min) for p in p_hats]
    weights = iter(rwr_weights([r for r, b in zip(r_envs, bands, strict=True) if b and r is not None],
                               rwr_lambda=config.rwr_lambda))
    scores = [
        CurriculumScore(seed_id=key, k=k, n=n, p_hat=p, r_env=r, weight=next(weights) if b else None, in_band=b)
        for (key, k, n), p, r, b in zip(counts, p_hats, r_envs, bands, strict=True)
    ]
    return scored_response(scores)


def in_band_share(scores: Sequence[CurriculumScore]) -> float | None:
    """The share of scored seed batches inside the band; None when none has a p̂.

    Batches without a single valid attempt have no p̂, so they are left out of the share rather than counted as
    out of band.
    """
    scored = [s for s in scores if s.p_hat is not None]
    return sum(s.in_band for s in scored) / len(scored) if scored else None


def scored_response(scores: Sequence[CurriculumScore]) -> ScoreResponse:
    """Scores with their in-band share (freshly computed or read back from storage alike)."""
    return ScoreResponse(scores=list(scores), in_band_share=in_band_share(scores))
