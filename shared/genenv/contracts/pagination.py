"""Cursor pagination shared by every list endpoint."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel

DEFAULT_LIMIT = 50
"""Items per page when a list request names no ``limit``."""
MAX_LIMIT = 500
"""The largest ``limit`` a list request may ask for."""

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of results; pass ``next_cursor`` back as ``cursor`` for the next page."""

    items: list[T]
    next_cursor: str | None = None
