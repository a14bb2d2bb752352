"""The QA and exact-answer data domains ask the simulator for a question through one prompt builder: the prompt
text is pinned here, word for word, so the shared builder keeps each domain's wording."""

from __future__ import annotations

import json

from genenv.contracts.tasks import Seed
from genenv.domains import REGISTRY
from genenv.domains.qa.domain import question_messages

QA_SYSTEM = (
    "You write quiz questions that need two facts combined (e.g. 'Who was president of the United States in the "
    "year that Citibank was founded?'). The answer must be short (a name, date, number or yes/no) and correct. "
    'Reply with JSON only: {"question": ..., "answer": ...}.'
)


def test_the_builder_writes_example_then_target_only_when_attempts_were_counted() -> None:
    fresh = question_messages("S", None, "Solvers did", stats=(2, 5), target_success=0.5)
    assert fresh == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Write one new question. Solvers did 2 of 5 recent attempts; aim for 50%."},
    ]
    varied = question_messages("S", {"question": "Q?", "answer": "A"}, "Solvers did", stats=(0, 0), target_success=0.5)
    assert varied[1]["content"] == (
        'Example: {"question": "Q?", "answer": "A"}\nWrite one NEW question of the same kind.'
    )
    assert question_messages("S", None, "x", stats=(1, 2), target_success=None)[1]["content"] == (
        "Write one new question."
    )


def test_qa_prompt_keeps_its_wording() -> None:
    seed = Seed(id="bamboogle-1", domain="qa", payload={"question": "Who?", "golden_answers": ["Ada", "A."]})
    messages = REGISTRY.get("qa").simulator_messages(seed, 4, target_success=0.25, stats=(3, 8))
    assert messages == [
        {"role": "system", "content": QA_SYSTEM},
        {
            "role": "user",
            "content": 'Example: {"question": "Who?", "answer": "Ada"}\nWrite one NEW question of the same kind. '
            "Students answered 3 of 8 recent attempts; aim for 25%.",
        },
    ]


def test_exact_answer_prompt_keeps_its_wording() -> None:
    content = json.dumps({"question": "What is 2 + 2?", "answer": "4"}) + "\n"
    domain = REGISTRY.data_domain("prompt_sums", "exact_answer", content, {"normalize": "number"})
    seed = Seed(id="s1", domain="prompt_sums", payload={"question": "What is 2 + 2?", "answer": "4", "extra": 1})
    messages = domain.simulator_messages(seed, 4, target_success=0.7, stats=(1, 4))
    assert messages == [
        {
            "role": "system",
            "content": "You write questions for a student. Each question has exactly one correct answer, a number. "
            'Reply with JSON only: {"question": ..., "answer": ...}.',
        },
        {
            "role": "user",
            "content": 'Example: {"question": "What is 2 + 2?", "answer": "4"}\nWrite one NEW question of the same '
            "kind. The student solved 1 of 4 recent attempts; aim for 70%.",
        },
    ]
    assert domain.simulator_messages(None, 4, target_success=None, stats=None)[1]["content"] == (
        "Write one new question."
    )
