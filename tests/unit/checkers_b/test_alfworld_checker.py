"""ALFWorld actions: canonical exact match against the expert action (every expert action scores 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genenv.checkers.base import run_checker
from genenv.contracts.rollouts import VerdictErrorKind
from genenv.domains.alfworld_step.checker import canonical_action, check_action
from genenv.domains.alfworld_step.domain import DOMAIN, read_goal, step_payloads
from tests.benchdata import BenchData, on_subset_and_full


def _games(benchmarks_dir: Path) -> list[dict[str, object]]:
    lines = (benchmarks_dir / "alfworld" / "games_index.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("Go to Desk 1.", "go to desk 1"),
        ("  `take mug 1 from desk 1`  ", "take mug 1 from desk 1"),
        ("put mug 1 in/on coffeemachine 1", "move mug 1 to coffeemachine 1"),
        ("put apple 2 in fridge 1", "move apple 2 to fridge 1"),
        ("move   apple 2 to  fridge 1", "move apple 2 to fridge 1"),
    ],
)
def test_canonical_action(raw: str, canonical: str) -> None:
    assert canonical_action(raw) == canonical


@on_subset_and_full("alfworld")
def test_every_expert_action_scores_one(data: BenchData) -> None:
    games = _games(data.root)
    assert len(games) == (274 if data.full else 8)
    steps = 0
    for game in games:
        goal = read_goal(data.root / "alfworld" / str(game["game_file"]))
        for payload in step_payloads(game, None, goal):
            for response in (payload["expert_action"], f"Action: {payload['expert_action']}\n"):
                v = DOMAIN.verify(payload, response)
                assert v.valid and v.score == 1.0, (game["game_file"], payload["step"])
            steps += 1
    assert steps == (1600 if data.full else sum(int(g["walkthrough_len"]) for g in games))


def test_other_action_scores_zero_and_reports_admissibility() -> None:
    v = check_action("go to desk 2", "go to desk 1", 1.0, ["go to desk 1", "go to desk 2"])
    assert v.valid and v.score == 0.0 and v.details["admissible"] is True
    v = check_action("think: the mug is on the desk\n> go to desk 1", "go to desk 1", 1.0, ["look"])
    assert v.valid and v.score == 1.0 and v.details["admissible"] is False


@pytest.mark.parametrize(
    ("response", "kind"),
    [
        ("", VerdictErrorKind.PARSE_ERROR),
        ("I think I should look around the room first.", VerdictErrorKind.PARSE_ERROR),
        ("think: only thoughts", VerdictErrorKind.PARSE_ERROR),
        ("go to " + "x" * 500, VerdictErrorKind.PARSE_ERROR),
        ("go to desk 1" * 5000, VerdictErrorKind.TOO_LARGE),
    ],
)
def test_malformed_actions_are_wrong_answers_scored_zero(response: str, kind: VerdictErrorKind) -> None:
    v = run_checker(lambda: check_action(response, "go to desk 1", 1.0))
    if kind is VerdictErrorKind.TOO_LARGE:  # too large to check is not the agent's wrong answer: invalid
        assert not v.valid and v.score is None and v.error is not None and v.error.kind is kind
    else:  # METHOD.md Eq. 1: a reply that does not parse is a wrong answer, scored 0
        assert v.valid and v.score == 0.0 and not v.success and v.form_error is not None and v.form_error.kind is kind


def test_task_without_expert_action_is_a_task_error() -> None:
    v = DOMAIN.verify({"goal": "x"}, "go to desk 1")
    assert not v.valid and v.error is not None and v.error.kind is VerdictErrorKind.TASK_ERROR
