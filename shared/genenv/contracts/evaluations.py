"""The metrics of a benchmark evaluation as stored in ``evaluation.metrics`` and read back.

genenv.benchmarks.base writes ``{"headline", "score", "overall": block, "categories": {name: block}, ...}``; every
reader parses it with :meth:`EvaluationMetrics.parse` instead of its own ``isinstance`` checks. Parsing is lenient
on purpose: the rows are history (older versions, other benchmarks, hand-made test rows), so a number that is not
a number reads as None and a block that is not a mapping as empty, rather than failing a report or a dashboard.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field, PrivateAttr

from genenv.contracts.base import ReadModel


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _mapping_or_empty(value: Any) -> Any:
    return value if isinstance(value, Mapping) else {}


Number = Annotated[float | None, BeforeValidator(_number_or_none)]
"""A stored number: anything that is not an int or float reads as None."""


class MetricsBlock(ReadModel):
    """One summary block (``overall`` or one category): the common counts plus each benchmark's own numbers, which
    stay readable through ``model_extra`` (em, f1, cs_hard_mean, macro_accuracy, ...)."""

    model_config = ConfigDict(extra="allow")

    accuracy: Number = Field(default=None, description="solved / n (invalid verdicts count as failures).")

    def numbers(self) -> dict[str, float | int]:
        """Every numeric entry of the block (booleans are flags, not numbers)."""
        return {k: v for k, v in self.model_dump().items()
                if isinstance(v, int | float) and not isinstance(v, bool)}


Block = Annotated[MetricsBlock, BeforeValidator(_mapping_or_empty)]


def _blocks(value: Any) -> Any:
    return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else {}


def _texts(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class EvaluationMetrics(ReadModel):
    """``evaluation.metrics``: the headline score, the overall block and one block per category."""

    headline: Annotated[str | None, BeforeValidator(_text_or_none)] = Field(
        default=None, description="Key in ``overall`` of the number the paper reports."
    )
    score: Number = Field(default=None, description="The headline number.")
    overall: Block = Field(default_factory=MetricsBlock)
    categories: Annotated[dict[str, Block], BeforeValidator(_blocks)] = Field(default_factory=dict)
    skipped: Annotated[dict[str, str], BeforeValidator(_texts)] = Field(
        default_factory=dict, description="Categories left out, with the reason."
    )
    # Older rows stored a bare number at the top level instead of a headline; score() still finds it.
    accuracy: Number = None
    f1: Number = None
    em: Number = None
    _legacy_overall: float | None = PrivateAttr(default=None)

    @classmethod
    def parse(cls, raw: Mapping[str, Any] | None) -> EvaluationMetrics:
        """The metrics of a stored or returned evaluation (None or a non-mapping reads as empty)."""
        if not isinstance(raw, Mapping):
            return cls()
        data = dict(raw)
        if isinstance(data.get("overall"), int | float):  # a legacy bare overall number: kept as the score's source
            data["legacy_overall"] = data.pop("overall")
        parsed = cls.model_validate(data)
        parsed._legacy_overall = _number_or_none(data.get("legacy_overall"))
        return parsed

    def headline_score(self) -> float | None:
        """The one number an epoch summary shows: ``score``, else the first legacy top-level number."""
        for value in (self.score, self.accuracy, self._legacy_overall, self.f1, self.em):
            if value is not None:
                return value
        return None

    def category_accuracies(self) -> dict[str, float]:
        """Accuracy per category, categories without one left out."""
        return {name: b.accuracy for name, b in self.categories.items() if b.accuracy is not None}
