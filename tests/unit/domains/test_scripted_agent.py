"""The scripted arithmetic agent (issue 33 item 5): its success rate is the known function of the task, judged by
the domain's own checker; presets are ordered; a seed fixes its replies; the frontier is where p = α."""

from __future__ import annotations

import math

import pytest

from genenv.domains.arithmetic.domain import DOMAIN, LEVELS, level_expression, make_payload
from genenv.domains.arithmetic.scripted_agent import (
    MAX_DIGITS,
    NO_ANSWER_REPLY,
    PRESETS,
    Profile,
    ScriptedAgent,
    TaskFeatures,
    expression_from_messages,
    features_of,
)

DRAWS = 3000
Z = 4.0
"""A 4σ binomial band: each comparison fails by chance with probability ≈ 6e-5."""


def _score(expression: str, reply: str) -> float:
    """The domain checker's verdict score (1.0 right, 0.0 wrong) on the task as the simulator would store it."""
    verdict = DOMAIN.verify(make_payload(expression), reply)
    assert verdict.valid, verdict
    assert verdict.score is not None
    return verdict.score


@pytest.mark.parametrize("preset", ["weak", "strong"])
@pytest.mark.parametrize("expression", ["3 + 4", "12 - 7", "4 * 5 + 3 - 2", "345 + 12", "12345 * 3 + 20000"])
def test_success_rate_matches_the_known_function(preset: str, expression: str) -> None:
    agent = ScriptedAgent(PRESETS[preset], seed=7)  # type: ignore[index]
    messages = DOMAIN.agent_messages(make_payload(expression))
    p = agent.profile.probability(features_of(expression))
    successes = sum(_score(expression, agent.reply(messages)) for _ in range(DRAWS))
    band = Z * math.sqrt(p * (1 - p) / DRAWS) + 1 / DRAWS
    assert abs(successes / DRAWS - p) <= band, (preset, expression, successes / DRAWS, p)


def test_every_reply_is_an_integer_and_right_exactly_when_the_agent_says_so() -> None:
    agent = ScriptedAgent("weak", seed=1)
    for level in LEVELS:
        for i in range(20):
            expression = level_expression(level, i)
            attempt = agent.attempt(DOMAIN.agent_messages(make_payload(expression)))
            assert attempt.expression == make_payload(expression)["expression"]
            assert _score(expression, attempt.reply) == (1.0 if attempt.correct else 0.0)


def test_the_correct_answer_is_the_domain_checkers_answer() -> None:
    # A profile that always succeeds (p ≈ 1 everywhere the test looks) shows the right answer is computed right.
    sure = ScriptedAgent(Profile("sure", bias=60.0, digit_weight=1.0, operator_weight=1.0), seed=0)
    for expression in ["3 + 4", "-2 * (3 - 9)", "100 - 250", "7 * 8 * 9 - 1"]:
        assert _score(expression, sure.reply(DOMAIN.agent_messages(make_payload(expression)))) == 1.0


def test_probability_falls_with_digits_and_operators() -> None:
    for profile in PRESETS.values():
        for k in range(1, 6):
            for d in range(1, MAX_DIGITS):
                p = profile.probability(TaskFeatures(d, k))
                assert profile.probability(TaskFeatures(d + 1, k)) < p
                assert profile.probability(TaskFeatures(d, k + 1)) < p


def test_strong_beats_weak_on_every_task() -> None:
    weak, strong = PRESETS["weak"], PRESETS["strong"]
    for k in range(1, 7):
        for d in range(1, MAX_DIGITS + 1):
            assert strong.probability(TaskFeatures(d, k)) > weak.probability(TaskFeatures(d, k))
    for alpha in (0.2, 0.5, 0.8):
        for w, s in zip(weak.frontier(alpha), strong.frontier(alpha), strict=True):
            assert s.digits > w.digits  # the strong agent's frontier lies at harder tasks


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.75])
def test_frontier_is_where_p_equals_alpha(alpha: float) -> None:
    for profile in PRESETS.values():
        for point in profile.frontier(alpha):
            # p is defined on real digits too: the frontier point is exactly p = α.
            logit = (profile.bias - profile.digit_weight * (point.digits - 1)
                     - profile.operator_weight * (point.operators - 1))
            assert 1 / (1 + math.exp(-logit)) == pytest.approx(alpha)
        cell, p = profile.nearest_cells(alpha)[0]
        assert all(abs(p - alpha) <= abs(q - alpha) for _, q in profile.nearest_cells(alpha))
        assert 1 <= cell.digits <= MAX_DIGITS


def test_weak_frontier_at_one_half_is_documented() -> None:
    weak, strong = PRESETS["weak"], PRESETS["strong"]
    assert weak.digits_at(0.5, 1) == pytest.approx(2.0) and weak.digits_at(0.5, 3) == pytest.approx(1.0)
    assert strong.digits_at(0.5, 1) == pytest.approx(5.0) and strong.digits_at(0.5, 3) == pytest.approx(4.0)
    assert weak.frontier(0.5)[0].in_domain and not weak.frontier(0.5)[5].in_domain


def test_capable_and_struggling_sit_on_either_side_of_what_the_simulator_writes_most() -> None:
    # The untrained 135M simulator's commonest task is a 2-digit sum (41 % of its epoch-0 tasks in the pilot):
    # the capable agent finds it too easy, the struggling one too hard, and each has its p = 0.5 frontier one digit
    # (or two operators) away, where the simulator still writes.
    capable, struggling = PRESETS["capable"], PRESETS["struggling"]
    two_digit_sum = TaskFeatures(digits=2, operators=1)
    assert capable.probability(two_digit_sum) > 0.75 > 0.25 > struggling.probability(two_digit_sum)
    assert 3.0 < capable.digits_at(0.5, 1) < 4.0 and capable.digits_at(0.5, 3) == pytest.approx(2.0)
    assert 1.0 < struggling.digits_at(0.5, 1) < 2.0 and struggling.digits_at(0.5, 3) == pytest.approx(1.0)


def test_seeded_agent_is_deterministic_and_seeds_differ() -> None:
    messages = DOMAIN.agent_messages(make_payload("47 + 38 - 12"))
    agents = [ScriptedAgent("weak", seed=s) for s in (3, 3, 4)]
    replies = [[agent.reply(messages) for _ in range(50)] for agent in agents]
    assert replies[0] == replies[1]
    assert replies[0] != replies[2]


def test_reads_the_expression_from_the_domain_prompt_only() -> None:
    messages = DOMAIN.agent_messages(make_payload("(12 + 7) * 3"))
    assert expression_from_messages(messages) == "(12 + 7) * 3"
    system_first = [{"role": "system", "content": "Be brief."}, *messages]
    assert expression_from_messages(system_first) == "(12 + 7) * 3"
    assert expression_from_messages([{"role": "user", "content": "hello"}]) is None
    agent = ScriptedAgent("strong")
    assert agent.reply([{"role": "user", "content": "hello"}]) == NO_ANSWER_REPLY
    verdict = DOMAIN.verify(make_payload("1 + 1"), NO_ANSWER_REPLY)
    assert verdict.score == 0.0 and verdict.form_error is not None  # a wrong-form reply, scored 0


def test_alpha_and_weights_are_checked() -> None:
    with pytest.raises(ValueError):
        PRESETS["weak"].digits_at(1.0, 1)
    with pytest.raises(ValueError):
        Profile("flat", bias=1.0, digit_weight=0.0, operator_weight=1.0)
