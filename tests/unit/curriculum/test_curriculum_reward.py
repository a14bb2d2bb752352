"""Properties of the α-curriculum reward, the band filter, RWR weights, the estimators and Thm 1's bound."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from genenv.contracts.runs import CurriculumConfig
from genenv.curriculum import (
    alpha_reward,
    beta_posterior_mean,
    estimate,
    in_band,
    ranking_error_bound,
    rwr_weights,
    score_batches,
    success_rate,
)

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
alphas = st.floats(min_value=0.01, max_value=0.99, allow_nan=False)
# β·(p̂−α)² ≤ 500·0.99² < 745 keeps exp(−β(p̂−α)²) a positive double (beyond it the true value underflows to 0).
betas = st.floats(min_value=0.01, max_value=500.0, allow_nan=False)


@given(p=unit, alpha=alphas, beta=betas)
def test_reward_lies_in_zero_one_and_peaks_at_alpha(p: float, alpha: float, beta: float) -> None:
    r = alpha_reward(p, alpha=alpha, beta=beta)
    assert 0.0 < r <= 1.0
    assert alpha_reward(alpha, alpha=alpha, beta=beta) == 1.0
    assert r <= alpha_reward(alpha, alpha=alpha, beta=beta)


@given(p1=unit, p2=unit, alpha=alphas, beta=betas)
def test_reward_decreases_with_distance_from_alpha(p1: float, p2: float, alpha: float, beta: float) -> None:
    d1, d2 = abs(p1 - alpha), abs(p2 - alpha)
    assume(d1 < d2)
    r1, r2 = alpha_reward(p1, alpha=alpha, beta=beta), alpha_reward(p2, alpha=alpha, beta=beta)
    assert r1 >= r2
    if beta * (d2**2 - d1**2) > 1e-9:
        assert r1 > r2


def test_reward_matches_the_formula_and_rejects_bad_input() -> None:
    assert alpha_reward(0.7, alpha=0.5, beta=20.0) == pytest.approx(math.exp(-20 * 0.04))
    with pytest.raises(ValueError):
        alpha_reward(1.2)
    with pytest.raises(ValueError):
        alpha_reward(0.5, beta=0.0)


@given(r=st.lists(unit, min_size=1, max_size=64), lam=st.floats(min_value=0.0, max_value=50.0))
def test_rwr_weights_have_mean_one_and_follow_exp_lambda_r(r: list[float], lam: float) -> None:
    w = rwr_weights(r, rwr_lambda=lam)
    assert len(w) == len(r)
    assert sum(w) / len(w) == pytest.approx(1.0, rel=1e-9)
    assert all(x > 0 for x in w)
    i, j = int(np.argmax(r)), int(np.argmin(r))
    assert w[i] / w[j] == pytest.approx(math.exp(lam * (r[i] - r[j])), rel=1e-9)


def test_rwr_weights_of_an_empty_batch_are_empty() -> None:
    assert rwr_weights([]) == []


@given(p=unit, alpha=alphas, k_min=st.floats(min_value=0.0, max_value=0.5))
def test_band_filter_is_its_definition(p: float, alpha: float, k_min: float) -> None:
    distance = abs(p - alpha)
    if distance <= k_min:
        assert in_band(p, alpha=alpha, k_min=k_min)
    elif distance > k_min + 1e-6:
        assert not in_band(p, alpha=alpha, k_min=k_min)


@given(
    n=st.integers(min_value=1, max_value=60),
    data=st.data(),
    alpha=st.sampled_from(["0.3", "0.4", "0.5", "0.6", "0.7"]),
    k_min=st.sampled_from(["0", "0.05", "0.1", "0.2", "0.25"]),
)
def test_band_filter_is_exact_on_success_rates(n: int, data: st.DataObject, alpha: str, k_min: str) -> None:
    """On p̂ = k/n the decision equals exact rational arithmetic, boundary included (|p̂−α| = k_min is in)."""
    k = data.draw(st.integers(min_value=0, max_value=n))
    exact = abs(Fraction(k, n) - Fraction(alpha)) <= Fraction(k_min)
    assert in_band(k / n, alpha=float(alpha), k_min=float(k_min)) == exact


@given(n=st.integers(min_value=0, max_value=500), data=st.data())
def test_estimators(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=0, max_value=n))
    p_beta = beta_posterior_mean(k, n)
    assert 0.0 < p_beta < 1.0
    assert p_beta == pytest.approx((k + 1) / (n + 2))
    if n == 0:
        assert success_rate(k, n) is None
        assert estimate(k, n, use_beta_prior=True) is None
    else:
        p = success_rate(k, n)
        assert p == k / n
        # The prior pulls towards ½: the posterior mean lies between k/n and ½.
        assert min(p, 0.5) - 1e-12 <= p_beta <= max(p, 0.5) + 1e-12
        assert estimate(k, n, use_beta_prior=True) == p_beta


def test_estimators_reject_impossible_counts() -> None:
    with pytest.raises(ValueError):
        success_rate(3, 2)
    with pytest.raises(ValueError):
        beta_posterior_mean(-1, 2)


@given(
    counts=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=30),
    beta=st.floats(min_value=0.5, max_value=100.0),
    lam=st.floats(min_value=0.0, max_value=10.0),
    prior=st.booleans(),
)
def test_score_batches(counts: list[tuple[int, int]], beta: float, lam: float, prior: bool) -> None:
    batches = [(f"s{i}", min(a, b), max(a, b)) for i, (a, b) in enumerate(counts)]
    cfg = CurriculumConfig(beta=beta, rwr_lambda=lam, use_beta_prior=prior)
    res = score_batches(batches, cfg)
    assert [s.seed_id for s in res.scores] == [b[0] for b in batches]
    banded = [s for s in res.scores if s.in_band]
    for s in res.scores:
        if s.n == 0:
            assert s.p_hat is None and s.r_env is None and not s.in_band
            continue
        assert s.p_hat == estimate(s.k, s.n, use_beta_prior=prior)
        assert s.r_env == pytest.approx(alpha_reward(s.p_hat, alpha=0.5, beta=beta))
        assert s.in_band == in_band(s.p_hat, alpha=0.5, k_min=0.1)
        assert (s.weight is not None) == s.in_band
    if banded:
        assert sum(s.weight for s in banded if s.weight is not None) / len(banded) == pytest.approx(1.0)
    scored = [s for s in res.scores if s.p_hat is not None]
    assert res.in_band_share == (len(banded) / len(scored) if scored else None)


def test_score_batches_weights_prefer_alpha() -> None:
    res = score_batches([("near", 5, 10), ("edge", 4, 10), ("far", 9, 10)], CurriculumConfig(beta=20, rwr_lambda=5))
    near, edge, far = res.scores
    assert near.in_band and edge.in_band and not far.in_band
    assert near.weight is not None and edge.weight is not None and near.weight > 1.0 > edge.weight
    assert far.weight is None
    assert res.in_band_share == pytest.approx(2 / 3)


# ---- Thm 1: ranking two task types by R_env(p̂) is wrong with probability ≤ 4·exp(−(2/9)(Δ₂−Δ₁)²·n) ----


def _binomial_pmf(n: int, p: float) -> np.ndarray:
    k = np.arange(n + 1)
    if p in (0.0, 1.0):
        return (k == (n if p == 1.0 else 0)).astype(float)
    log_comb = np.array([math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in k])
    return np.exp(log_comb + k * math.log(p) + (n - k) * math.log1p(-p))


def _exact_ranking_error(p1: float, p2: float, n: int, alpha: float, beta: float) -> float:
    """P(R_env(p̂₁) ≤ R_env(p̂₂)) for p̂ᵢ = Binomial(n, pᵢ)/n; ties count as errors."""
    r = np.array([alpha_reward(k / n, alpha=alpha, beta=beta) for k in range(n + 1)])
    wrong = r[:, None] <= r[None, :]
    return float(_binomial_pmf(n, p1) @ wrong.astype(float) @ _binomial_pmf(n, p2))


@settings(max_examples=150, deadline=None)
@given(p1=unit, p2=unit, alpha=alphas, beta=st.floats(min_value=0.5, max_value=200.0),
       n=st.integers(min_value=1, max_value=300))
def test_ranking_error_stays_under_the_theorem_bound_exactly(
    p1: float, p2: float, alpha: float, beta: float, n: int
) -> None:
    d1, d2 = abs(p1 - alpha), abs(p2 - alpha)
    assume(d2 - d1 > 0.02)  # type 1 is the one nearer α, so R_env should rank it higher
    assert _exact_ranking_error(p1, p2, n, alpha, beta) <= ranking_error_bound(d1, d2, n) + 1e-12


# Cases where the bound is informative (below 1): (Δ₂−Δ₁)²·n > (9/2)·ln 4 ≈ 6.24. With a bound of 1 a test
# of "error ≤ bound" could never fail.
BOUND_CASES = [(0.5, 0.9, 60), (0.45, 0.05, 100), (0.55, 0.95, 200), (0.5, 0.1, 45), (0.6, 0.0, 70)]


@pytest.mark.parametrize(("p1", "p2", "n"), BOUND_CASES)
def test_simulated_ranking_error_stays_under_the_bound(p1: float, p2: float, n: int) -> None:
    """Monte-Carlo version: sample p̂ per task type, rank by R_env, count mistakes."""
    rng = np.random.default_rng(0)
    trials, alpha, beta = 20_000, 0.5, 20.0
    bound = ranking_error_bound(abs(p1 - alpha), abs(p2 - alpha), n)
    assert bound < 1.0
    k1, k2 = rng.binomial(n, p1, size=trials), rng.binomial(n, p2, size=trials)
    r1 = np.exp(-beta * (k1 / n - alpha) ** 2)
    r2 = np.exp(-beta * (k2 / n - alpha) ** 2)
    empirical = float(np.mean(r1 <= r2))
    slack = 4 * math.sqrt(max(bound * (1 - bound), 1e-6) / trials)
    assert empirical <= bound + slack
    assert empirical == pytest.approx(_exact_ranking_error(p1, p2, n, alpha, beta), abs=0.02)


@pytest.mark.parametrize(("p1", "p2", "n"), BOUND_CASES)
def test_the_bound_check_catches_a_wrong_estimator(p1: float, p2: float, n: int) -> None:
    """The same check fails for a scorer that prefers the task type FARTHER from α (the inverted ranking), so
    passing it above says something about R_env(p̂)."""
    rng = np.random.default_rng(0)
    trials, alpha = 20_000, 0.5
    k1, k2 = rng.binomial(n, p1, size=trials), rng.binomial(n, p2, size=trials)
    wrong1, wrong2 = np.abs(k1 / n - alpha), np.abs(k2 / n - alpha)  # larger = "better": inverted ranking
    empirical = float(np.mean(wrong1 <= wrong2))
    assert empirical > ranking_error_bound(abs(p1 - alpha), abs(p2 - alpha), n)


def test_in_band_share_leaves_out_batches_without_an_estimate() -> None:
    from genenv.contracts.scores import CurriculumScore
    from genenv.curriculum.scoring import in_band_share, scored_response

    def score(seed: str, p_hat: float | None, band: bool) -> CurriculumScore:
        return CurriculumScore(seed_id=seed, k=0, n=0 if p_hat is None else 4, p_hat=p_hat, r_env=None,
                               weight=None, in_band=band)

    scores = [score("a", 0.5, True), score("b", 0.0, False), score("c", None, False), score("d", 0.25, True)]
    assert in_band_share(scores) == 2 / 3
    assert in_band_share([score("c", None, False)]) is None
    assert scored_response(scores).in_band_share == 2 / 3
