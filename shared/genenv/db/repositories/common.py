"""Helpers shared by the repositories: opaque keyset cursors, UTC normalisation and the tenant filter."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from sqlalchemy import CursorResult, Row, Select, text
from sqlalchemy.orm import InstrumentedAttribute, Session

from genenv.contracts.errors import GenEnvError
from genenv.tenancy import Caller

T = TypeVar("T", bound=tuple[Any, ...])


class InvalidCursorError(GenEnvError):
    """The cursor was not produced by this server (or was edited)."""

    status_code = 400

    def __init__(self) -> None:
        super().__init__(
            "invalid cursor; pass the next_cursor of the previous page unchanged",
            param="cursor",
            code="invalid_cursor",
        )


def encode_cursor(values: Sequence[Any]) -> str:
    """Opaque cursor for a keyset position (base64url of a JSON list)."""
    raw = json.dumps(list(values), separators=(",", ":"), default=str).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, types: Sequence[type]) -> list[Any]:
    """The keyset position in ``cursor``; InvalidCursorError (400) unless it holds values of ``types``."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        values = json.loads(raw)
    except (binascii.Error, ValueError) as exc:
        raise InvalidCursorError() from exc
    if not isinstance(values, list) or len(values) != len(types):
        raise InvalidCursorError()
    out: list[Any] = []
    for value, kind in zip(values, types, strict=True):
        if kind is datetime:
            if not isinstance(value, str):
                raise InvalidCursorError()
            try:
                out.append(datetime.fromisoformat(value))
            except ValueError as exc:
                raise InvalidCursorError() from exc
        elif isinstance(value, bool) or not isinstance(value, kind):  # JSON true is not an id
            raise InvalidCursorError()
        else:
            out.append(value)
    return out


def keyset_page(
    session: Session,
    stmt: Select[T],
    id_column: InstrumentedAttribute[int],
    *,
    cursor: str | None,
    limit: int,
) -> tuple[Sequence[Row[T]], str | None]:
    """Rows of ``stmt`` after ``cursor`` in ascending ``id_column`` order, and the next page's cursor.

    ``stmt`` must select first the entity owning ``id_column`` (the cursor is read from ``row[0].id``) or
    ``id_column`` itself.
    """
    if cursor is not None:
        (after,) = decode_cursor(cursor, [int])
        stmt = stmt.where(id_column > after)
    rows = session.execute(stmt.order_by(id_column).limit(limit + 1)).all()
    if len(rows) <= limit:
        return rows, None
    page = rows[:limit]
    last = page[-1][0]
    return page, encode_cursor([last if isinstance(last, int) else last.id])


S = TypeVar("S", bound=Select[Any])


def visible_to(stmt: S, tenant_column: InstrumentedAttribute[str], caller: Caller) -> S:
    """``stmt`` narrowed to the rows ``caller`` may see: its tenant's, or every tenant's for a service token.

    The one tenant filter: every read of a run or an experiment on behalf of a request goes through it, so another
    tenant's object is absent (404, the same answer as an unknown id) rather than forbidden.
    """
    return stmt if caller.all_tenants else stmt.where(tenant_column == caller.tenant)


def serialize_on(session: Session, key: str) -> None:
    """Hold a transaction-scoped lock on ``key`` until commit (Postgres advisory lock; SQLite already serialises
    writers): two requests counting toward one tenant limit then count one after the other, each seeing what the
    other committed, so neither can slip past the limit between its count and its write."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": key})


E = TypeVar("E")


def one_or_raise(
    session: Session, stmt: Select[tuple[E]], missing: Callable[[], Exception], *, for_update: bool = False
) -> E:
    """The single row of ``stmt`` (row-locked on Postgres when ``for_update``), else ``missing()`` raised."""
    if for_update:
        stmt = stmt.with_for_update()
    row = session.scalars(stmt).one_or_none()
    if row is None:
        raise missing()
    return row


def as_utc(value: datetime) -> datetime:
    """SQLite returns naive datetimes (stored as UTC); Postgres aware ones. Report both as aware UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def as_utc_opt(value: datetime | None) -> datetime | None:
    """``as_utc`` for nullable columns."""
    return None if value is None else as_utc(value)


def rowcount(result: Any) -> int:
    """Rows an UPDATE or DELETE matched (what a conditional write checks)."""
    assert isinstance(result, CursorResult)
    return int(result.rowcount)
