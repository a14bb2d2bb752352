"""Opaque keyset cursors and UTC normalisation used by every list endpoint."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from genenv.db.repositories.common import InvalidCursorError, as_utc, decode_cursor, encode_cursor


def test_round_trip() -> None:
    when = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    cursor = encode_cursor([when.isoformat(), "abc"])
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert decode_cursor(cursor, [datetime, str]) == [when, "abc"]
    assert decode_cursor(encode_cursor([42]), [int]) == [42]


@pytest.mark.parametrize(
    ("cursor", "types"),
    [
        ("!!!", [int]),
        ("bm90IGpzb24", [int]),  # "not json"
        (encode_cursor(["x"]), [int]),
        (encode_cursor([True]), [int]),
        (encode_cursor([1, 2]), [int]),
        (encode_cursor({"a": 1}), [int]),  # type: ignore[arg-type]
        (encode_cursor(["not a date", "id"]), [datetime, str]),
        (encode_cursor([5, "id"]), [datetime, str]),
    ],
)
def test_invalid_cursors_are_400_on_param_cursor(cursor: str, types: list[type]) -> None:
    with pytest.raises(InvalidCursorError) as info:
        decode_cursor(cursor, types)
    assert info.value.status_code == 400
    assert info.value.param == "cursor"


def test_as_utc() -> None:
    naive = datetime(2025, 1, 1, 12, 0)
    assert as_utc(naive) == datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    plus_two = datetime(2025, 1, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert as_utc(plus_two).tzinfo is UTC and as_utc(plus_two).hour == 12
