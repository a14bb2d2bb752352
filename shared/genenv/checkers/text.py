"""Free-text answers: SQuAD normalisation, exact match and token-F1 (Bamboogle and other short-answer QA).

The normaliser is the one of the official SQuAD v1.1 evaluation script (and of FlashRAG / Search-R1, which
Bamboogle numbers are usually computed with): lower-case, drop ASCII punctuation, drop the articles a/an/the,
collapse whitespace. EM and F1 take the maximum over all gold answers.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

from genenv.checkers.base import DEFAULT_MAX_RESPONSE_CHARS, CheckFailure, valid_verdict
from genenv.contracts.rollouts import Verdict, VerdictErrorKind

MAX_ANSWER_CHARS = 2_000
"""An extracted answer longer than this is not a short answer; it is scored as given but not kept in details."""

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ANSWER_MARKER = re.compile(r"(?:final answer|answer)\s*[:：]\s*", re.IGNORECASE)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower, strip punctuation, drop articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    """1.0 when the normalised prediction equals some normalised gold answer."""
    pred = normalize_answer(prediction)
    return 1.0 if any(pred == normalize_answer(g) for g in golds) else 0.0


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    # SQuAD v2 convention: when either side normalises to nothing, F1 is 1 iff both do.
    if not pred_tokens or not gold_tokens:
        return 1.0 if pred_tokens == gold_tokens else 0.0
    common = Counter(pred_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """Token-level F1 of the normalised prediction against the best gold answer."""
    pred_tokens = normalize_answer(prediction).split()
    return max((_f1(pred_tokens, normalize_answer(g).split()) for g in golds), default=0.0)


def extract_answer(response: str, *, max_chars: int = DEFAULT_MAX_RESPONSE_CHARS) -> str:
    """The answer part of a reply: the text after the last 'Answer:' marker if any, else the first non-empty line."""
    if len(response) > max_chars:
        raise CheckFailure(VerdictErrorKind.TOO_LARGE, f"response has {len(response)} characters (limit {max_chars})")
    text = response.strip()
    markers = list(_ANSWER_MARKER.finditer(text))
    if markers:
        text = text[markers[-1].end() :].strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if not line:
        raise CheckFailure(VerdictErrorKind.PARSE_ERROR, "empty answer")
    return line


def check_free_text(response: str, golds: Sequence[str], threshold: float) -> Verdict:
    """R_agent for a free-text answer: score = token-F1 (METHOD.md Eq. 1), EM reported alongside."""
    if not golds:
        raise CheckFailure(VerdictErrorKind.TASK_ERROR, "task has no gold answer")
    answer = extract_answer(response)
    em = exact_match(answer, golds)
    f1 = token_f1(answer, golds)
    details: dict[str, object] = {"em": em, "f1": f1}
    if len(answer) <= MAX_ANSWER_CHARS:
        details["answer"] = answer
    return valid_verdict(f1, threshold, details)


def _number(text: str) -> float | None:
    """The last number a reply states (``1,234.5`` → 1234.5), or None."""
    found = re.findall(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?|-?\.\d+", text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def check_exact_answer(response: str, answer: str, normalize: str, threshold: float) -> Verdict:
    """R_agent for an answer that must equal the gold after a normalisation: ``number`` (the last number of the
    reply equals the gold number, relative tolerance 1e-9), ``exact`` (the extracted answer, stripped) or
    ``case-insensitive`` (SQuAD normalisation: case, punctuation and articles ignored)."""
    extracted = extract_answer(response)
    if normalize == "number":
        gold, got = _number(answer), _number(extracted)
        if gold is None:
            raise CheckFailure(VerdictErrorKind.TASK_ERROR, f"gold answer {answer!r} is not a number")
        if got is None:
            raise CheckFailure(VerdictErrorKind.PARSE_ERROR, "no number in the reply")
        score = 1.0 if abs(got - gold) <= 1e-9 * max(1.0, abs(gold)) else 0.0
    elif normalize == "exact":
        score = 1.0 if extracted.strip() == answer.strip() else 0.0
    elif normalize == "case-insensitive":
        score = exact_match(extracted, [answer])
    else:
        raise CheckFailure(VerdictErrorKind.TASK_ERROR, f"unknown normalisation {normalize!r}")
    details: dict[str, object] = {"normalize": normalize}
    if len(extracted) <= MAX_ANSWER_CHARS:
        details["answer"] = extracted
    return valid_verdict(score, threshold, details)
