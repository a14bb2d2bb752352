"""The query parameters of every cursor-paginated list endpoint, written once for all services."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from genenv.contracts.pagination import MAX_LIMIT

Cursor = Annotated[
    str | None,
    Query(max_length=1024, pattern=r"^[A-Za-z0-9_-]+$", description="next_cursor of the previous page."),
]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items per page.")]
