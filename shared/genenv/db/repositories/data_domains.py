"""Stored data-defined domains: plain rows of the data_domain table (the seed file, its kind and options).

What a row means (checking a seed file, building its Domain, refusing a taken name) is the catalogue's
(:mod:`genenv.catalogue`); this module only reads and writes rows.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from genenv.db.models import DataDomainRow


def get(session: Session, name: str) -> DataDomainRow | None:
    """The stored domain called ``name``, or None."""
    return session.get(DataDomainRow, name)


def list_all(session: Session) -> list[DataDomainRow]:
    """Every stored domain, by name."""
    return list(session.scalars(select(DataDomainRow).order_by(DataDomainRow.name)))


def names(session: Session) -> list[str]:
    """The stored domains' names, sorted."""
    return list(session.scalars(select(DataDomainRow.name).order_by(DataDomainRow.name)))


def insert(
    session: Session, *, name: str, kind: str, options: dict[str, Any], content: str, sha256: str, train_rows: int,
    eval_rows: int,
) -> DataDomainRow:
    """Store a (checked) domain; the caller has made sure the name is free."""
    row = DataDomainRow(name=name, kind=kind, options=options, content=content, sha256=sha256,
                        train_rows=train_rows, eval_rows=eval_rows)
    session.add(row)
    session.flush()
    return row
