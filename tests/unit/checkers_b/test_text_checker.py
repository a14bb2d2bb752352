"""SQuAD normalisation, EM and token-F1 (Bamboogle's free-text checker)."""

from __future__ import annotations

import pytest

from genenv.checkers.base import run_checker
from genenv.checkers.text import check_free_text, exact_match, extract_answer, normalize_answer, token_f1
from genenv.contracts.rollouts import VerdictErrorKind
from genenv.domains.qa.domain import DOMAIN, load_bamboogle
from tests.benchdata import BenchData, on_subset_and_full


@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  James   MADISON. ", "james madison"),
        ("an apple, a pear", "apple pear"),
        ("Theodore", "theodore"),  # 'the' is only dropped as a whole word
        ("U.S.A.", "usa"),
    ],
)
def test_normalize_answer_follows_squad(raw: str, norm: str) -> None:
    assert normalize_answer(raw) == norm


def test_exact_match_takes_the_best_gold() -> None:
    assert exact_match("the Titan IIIE", ["Titan IIIE"]) == 1.0
    assert exact_match("Titan", ["Titan IIIE", "Voyager"]) == 0.0
    assert exact_match("voyager", ["Titan IIIE", "Voyager"]) == 1.0


def test_token_f1_values() -> None:
    # pred {james, madison, jr}, gold {james, madison}: P = 2/3, R = 1 → F1 = 0.8
    assert token_f1("James Madison Jr", ["James Madison"]) == pytest.approx(0.8)
    assert token_f1("nothing in common", ["James Madison"]) == 0.0
    assert token_f1("the", ["a"]) == 1.0  # both normalise to empty (SQuAD v2 convention)
    assert token_f1("the", ["James"]) == 0.0


def test_extract_answer_prefers_answer_marker_and_first_line() -> None:
    assert extract_answer("Let me think.\nAnswer: James Madison\nBecause ...") == "James Madison"
    assert extract_answer("\n\n  1999 \nmore text") == "1999"


def test_check_free_text_scores_f1_and_reports_em() -> None:
    v = check_free_text("Answer: James Madison Jr", ["james madison"], 0.5)
    assert v.valid and v.score == pytest.approx(0.8) and v.success
    assert v.details["em"] == 0.0 and v.details["f1"] == pytest.approx(0.8)


@pytest.mark.parametrize(
    ("response", "kind"),
    [
        ("", VerdictErrorKind.PARSE_ERROR),
        ("   \n ", VerdictErrorKind.PARSE_ERROR),
        ("Answer:", VerdictErrorKind.PARSE_ERROR),
        ("x" * 40_000, VerdictErrorKind.TOO_LARGE),
    ],
)
def test_malformed_answers_are_wrong_answers_scored_zero(response: str, kind: VerdictErrorKind) -> None:
    v = run_checker(lambda: check_free_text(response, ["james madison"], 0.5))
    if kind is VerdictErrorKind.TOO_LARGE:  # too large to check is not the agent's wrong answer: invalid
        assert not v.valid and v.score is None and v.error is not None and v.error.kind is kind
    else:  # METHOD.md Eq. 1: a reply that does not parse is a wrong answer, scored 0
        assert v.valid and v.score == 0.0 and not v.success and v.form_error is not None and v.form_error.kind is kind


def test_task_without_gold_is_a_task_error() -> None:
    v = DOMAIN.verify({"question": "q?", "golden_answers": []}, "x")
    assert not v.valid and v.error is not None and v.error.kind is VerdictErrorKind.TASK_ERROR


@on_subset_and_full("bamboogle")
def test_every_bamboogle_gold_answer_scores_one(data: BenchData) -> None:
    items = load_bamboogle(data.root)
    assert len(items) == (125 if data.full else 15)
    for item in items:
        for gold in item["golden_answers"]:
            v = DOMAIN.verify(item, gold)
            assert v.valid and v.score == 1.0 and v.details["em"] == 1.0, item
