"""LoRA adapter versions per run and role."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from genenv.contracts.adapters import Role
from genenv.db.models import AdapterRow


def next_version(session: Session, run_id: str, role: Role) -> int:
    """The version number the next adapter of this role gets (1 for the first; 0 is the base model)."""
    current = session.scalar(
        select(func.max(AdapterRow.version)).where(AdapterRow.run_id == run_id, AdapterRow.role == role.value)
    )
    return (current or 0) + 1


def create_adapter(
    session: Session,
    *,
    run_id: str,
    role: Role,
    version: int,
    path: str,
    parent_version: int | None,
    metrics: dict[str, Any],
) -> AdapterRow:
    """Insert an adapter row; the unique (run, role, version) key rejects a second writer of the same version."""
    row = AdapterRow(
        run_id=run_id, role=role.value, version=version, path=path, parent_version=parent_version, metrics=metrics
    )
    session.add(row)
    session.flush()
    return row


def latest_adapter(session: Session, run_id: str, role: Role) -> AdapterRow | None:
    """The newest adapter of a role in a run, or None while the role is still the base model."""
    return session.scalars(
        select(AdapterRow)
        .where(AdapterRow.run_id == run_id, AdapterRow.role == role.value)
        .order_by(AdapterRow.version.desc())
        .limit(1)
    ).first()


def list_adapters(session: Session, run_id: str, role: Role | None = None) -> list[AdapterRow]:
    """All adapters of a run (optionally one role), oldest first."""
    stmt = select(AdapterRow).where(AdapterRow.run_id == run_id)
    if role is not None:
        stmt = stmt.where(AdapterRow.role == role.value)
    return list(session.scalars(stmt.order_by(AdapterRow.role, AdapterRow.version)))
