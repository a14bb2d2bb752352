"""Repeats of earlier epochs' valid tasks (genenv.curriculum.repeats): the measure the report uses and the key the
simulator's reject rule compares (tests/unit/inference/test_simulator_rejections.py runs the rule)."""

from __future__ import annotations

from genenv.curriculum.repeats import is_repeat, repeat_flags, repeat_key, repeat_share


def test_repeat_key_normalises_whitespace_only() -> None:
    assert repeat_key("  3 +\t4\n ") == repeat_key("3 + 4") == "3 + 4"
    assert repeat_key("3+4") != repeat_key("3 + 4")  # word for word: the domain's canonical form decides spacing
    assert repeat_key("Add 3") != repeat_key("add 3")
    assert is_repeat("3  + 4", {"3 + 4"}) and not is_repeat("3 + 5", {"3 + 4"})


def test_a_repeat_is_a_valid_task_of_an_earlier_epoch_of_the_same_run() -> None:
    tasks = [
        ("r1", 0, "1 + 1"), ("r1", 0, "1 + 1"),  # twice in one epoch: not a repeat (the duplicate rule's business)
        ("r1", 1, "1 +  1"), ("r1", 1, "2 + 2"),  # the first repeats epoch 0
        ("r2", 1, "2 + 2"),  # another run's task is not this run's history
        ("r1", 2, "2 + 2"), ("r1", 2, "3 + 3"),  # repeats epoch 1 (any earlier epoch counts)
        ("r1", 0, "9 + 9"),  # order of the input does not matter: epoch 0 is earlier than 1 and 2
        ("r2", 3, "2 + 2"),
    ]
    assert repeat_flags(tasks) == [False, False, True, False, False, True, False, False, True]
    later = [f for (_, epoch, _), f in zip(tasks, repeat_flags(tasks), strict=True) if epoch >= 1]
    assert repeat_share(later) == 3 / 6
    assert repeat_share([]) is None
