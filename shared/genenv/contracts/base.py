"""Base classes for wire models: write-models forbid unknown fields, read-models ignore them."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

MAX_INT32 = 2**31 - 1
"""Largest value of a database INTEGER column (epoch indexes, counts): a larger one is a 422, not a 500."""

_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_MODEL_NAME = re.compile(rf"{_SEGMENT}(/{_SEGMENT})?|(/{_SEGMENT})+")


def _model_name(value: str) -> str:
    if not _MODEL_NAME.fullmatch(value):
        raise ValueError(
            f"{value[:80]!r} is not a model name; give the folder name under paths.model_cache (e.g. "
            "'smollm2-135m-instruct'), a hub id 'org/name', or the model folder's absolute path without '.' or '..' "
            "segments"
        )
    return value


ModelName = Annotated[str, StringConstraints(min_length=1, max_length=200), AfterValidator(_model_name)]
"""A model: a folder name under paths.model_cache, a hub id ``org/name`` or a normalised absolute folder path (the
form the deployments mount models at); never a relative path, ``..`` or a hidden segment."""

Identifier = Annotated[str, StringConstraints(min_length=1, max_length=100, pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")]
"""A Python/module identifier such as a LoRA target module name (``q_proj``, ``mlp.down_proj``)."""


class WriteModel(BaseModel):
    """A request body: unknown fields are a client mistake and are rejected (422).

    Strict types: ``"3"`` is not an integer and ``false`` not a number (a client bug, never silently coerced), and
    ``Infinity``/``NaN`` are refused because no float field means them and Postgres JSONB cannot store them. Enum
    fields opt out of strictness (``Field(strict=False)``): FastAPI validates parsed JSON, where enums are strings.
    """

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class ReadModel(BaseModel):
    """A response body: unknown fields from a newer server are ignored by older clients."""

    model_config = ConfigDict(extra="ignore", from_attributes=True)
