"""The held-out arithmetic evaluator and the domains' difficulty measures (pure code, no model)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from genenv.benchmarks.base import UnknownSplitError, take
from genenv.domains import domain_names, get_domain
from genenv.domains.arithmetic.benchmark import EVALUATOR
from genenv.domains.arithmetic.domain import DOMAIN, HELDOUT_PER_LEVEL, LEVELS, make_payload, split_of


def test_items_are_the_eval_split_only_and_never_seeds() -> None:
    items = EVALUATOR.load_items(Path("/nonexistent"), "eval")  # the domain generates them: no data folder needed
    seeds = {s.payload["expression"] for s in DOMAIN.load_seeds(None, "train")}
    assert items and all(split_of(i.payload["expression"]) == "eval" for i in items)
    assert not seeds & {i.payload["expression"] for i in items}
    assert {i.category for i in items} == {lv.name for lv in LEVELS}
    assert [i.id for i in items] == [i.id for i in EVALUATOR.load_items(Path("/x"), "eval")]  # stable order
    with pytest.raises(UnknownSplitError):
        EVALUATOR.load_items(Path("/x"), "train")


def test_a_limit_takes_the_same_items_per_level() -> None:
    items = EVALUATOR.load_items(Path("/x"), "eval")
    available = Counter(i.category for i in items)
    picked = take(items, 70)
    per_level = Counter(i.category for i in picked)
    # Round-robin over the levels: a level with few eval expressions gives all of them (1d-addsub has 7: one-digit
    # a ± b has few distinct expressions), the others share the rest evenly.
    assert sum(per_level.values()) == 70 and set(per_level) == {lv.name for lv in LEVELS}
    for level, n in per_level.items():
        assert n == available[level] or n in (10, 11)
    assert [i.id for i in picked] == [i.id for i in take(EVALUATOR.load_items(Path("/x"), "eval"), 70)]


def test_the_evaluator_scores_with_the_domain_checker() -> None:
    item = EVALUATOR.load_items(Path("/x"), "eval")[0]
    answer = item.payload["answer"]
    assert DOMAIN.verify(item.payload, f"{item.payload['expression']} = {answer}").success
    assert not DOMAIN.verify(item.payload, str(answer + 1)).success


def test_arithmetic_difficulty_follows_the_level_axes() -> None:
    easy = DOMAIN.difficulty(make_payload("3 + 4"))
    hard = DOMAIN.difficulty(make_payload("(123 - 45) * 6 + 7"))
    assert easy == {"operand_digits": 1.0, "operators": 1.0, "has_mul": 0.0}
    assert hard == {"operand_digits": 3.0, "operators": 3.0, "has_mul": 1.0}
    # A payload stored without the derived fields (older rows) is measured from its expression.
    assert DOMAIN.difficulty({"expression": "12 * 3 - 4"}) == {"operand_digits": 2.0, "operators": 2.0, "has_mul": 1.0}


@pytest.mark.parametrize("name", domain_names())
def test_every_domain_documents_its_difficulty_measures(name: str) -> None:
    domain = get_domain(name)
    assert domain.difficulty_measures and all(domain.difficulty_measures.values())
    measured = domain.difficulty({"question": "q", "functions": [], "ground_truth": [], "expression": "1 + 2"})
    assert set(measured) == set(domain.difficulty_measures)


def test_the_larger_heldout_split_is_stratified_and_never_a_seed() -> None:
    items = EVALUATOR.load_items(Path("/x"), "heldout")
    assert len(items) >= 500 and len({i.payload["expression"] for i in items}) == len(items)
    per_level = Counter(i.category for i in items)
    assert set(per_level) == {lv.name for lv in LEVELS}
    assert max(per_level.values()) == HELDOUT_PER_LEVEL  # the large levels fill their quota
    seeds = {s.payload["expression"] for s in DOMAIN.load_seeds(None, "train")}
    assert all(split_of(i.payload["expression"]) == "eval" and i.payload["expression"] not in seeds for i in items)
    assert [i.id for i in items] == [i.id for i in EVALUATOR.load_items(Path("/y"), "heldout")]  # stable
