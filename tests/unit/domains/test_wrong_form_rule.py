"""One rule for every domain (METHOD.md, Eq. 1 and "Invalid ≠ wrong"): a reply that does not parse is a wrong
answer, scored 0 and counted; only failures that are not the agent's (a broken task, an oversized reply, a failed
request) stay invalid."""

from __future__ import annotations

from pathlib import Path

import pytest

from genenv.checkers.base import DEFAULT_MAX_RESPONSE_CHARS
from genenv.contracts.rollouts import VerdictErrorKind
from genenv.domains import get_domain
from genenv.domains.alfworld_step.domain import AlfworldStepDomain
from genenv.domains.base import Domain
from genenv.domains.travel_plan.domain import TravelPlanDomain

DOMAINS = ["arithmetic", "function_calling", "qa", "api_bank", "alfworld_step", "travel_plan"]
PROSE = "I am sorry, but I cannot help with that request. Let me think about it some more."


def _domain(name: str, tmp_path: Path, benchmarks_dir: Path) -> Domain:
    if name == "travel_plan":
        return TravelPlanDomain(benchmarks_dir)  # its database from the subset, not from the settings
    return AlfworldStepDomain(cache_dir=tmp_path) if name == "alfworld_step" else get_domain(name)


@pytest.mark.parametrize("name", DOMAINS)
@pytest.mark.parametrize("reply", ["", "   \n", PROSE])
def test_a_reply_that_is_not_an_answer_scores_zero_and_counts(
    name: str, reply: str, benchmarks_dir: Path, tmp_path: Path
) -> None:
    domain = _domain(name, tmp_path, benchmarks_dir)
    task = domain.load_seeds(benchmarks_dir, "train")[0].payload
    v = domain.verify(task, reply)
    assert v.valid and v.score == 0.0 and not v.success and v.error is None
    if name != "qa" or not reply.strip():  # prose is a (wrong) free-text answer in qa, not a form error
        assert v.form_error is not None
        assert v.form_error.kind in {VerdictErrorKind.PARSE_ERROR, VerdictErrorKind.SCHEMA_ERROR}


@pytest.mark.parametrize("name", DOMAINS)
def test_an_oversized_reply_is_invalid_not_scored(name: str, benchmarks_dir: Path, tmp_path: Path) -> None:
    if name == "arithmetic":
        pytest.skip("arithmetic reads the last integer of any reply; it has no size limit to exceed")
    domain = _domain(name, tmp_path, benchmarks_dir)
    task = domain.load_seeds(benchmarks_dir, "train")[0].payload
    v = domain.verify(task, "x" * (DEFAULT_MAX_RESPONSE_CHARS + 1))
    assert not v.valid and v.score is None and v.error is not None and v.error.kind is VerdictErrorKind.TOO_LARGE
