"""What each inference server currently serves (the adapter publisher's memory). Flush, never commit."""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from genenv.db.models import ServedAdapterRow, utcnow
from genenv.db.repositories.upsert import insert_for


def list_served(
    session: Session, server: str, *, run_id: str | None = None, role: str | None = None
) -> list[ServedAdapterRow]:
    """Adapters recorded as loaded on ``server`` (optionally one run/role), newest version first."""
    stmt = select(ServedAdapterRow).where(ServedAdapterRow.server == server)
    if run_id is not None:
        stmt = stmt.where(ServedAdapterRow.run_id == run_id)
    if role is not None:
        stmt = stmt.where(ServedAdapterRow.role == role)
    return list(session.scalars(stmt.order_by(ServedAdapterRow.version.desc(), ServedAdapterRow.name)))


def record_served(session: Session, *, server: str, name: str, run_id: str, role: str, version: int, path: str) -> None:
    """Upsert the fact that ``server`` serves adapter ``name`` (keyed on (server, name))."""
    values = {"server": server, "name": name, "run_id": run_id, "role": role, "version": version, "path": path}
    stmt = insert_for(session, ServedAdapterRow).values(**values, loaded_at=utcnow())
    stmt = stmt.on_conflict_do_update(
        index_elements=["server", "name"],
        set_={"run_id": run_id, "role": role, "version": version, "path": path, "loaded_at": utcnow()},
    )
    session.execute(stmt)
    session.flush()


def remove_served(session: Session, server: str, name: str) -> None:
    """Forget that ``server`` serves ``name`` (no-op when it was not recorded)."""
    session.execute(delete(ServedAdapterRow).where(ServedAdapterRow.server == server, ServedAdapterRow.name == name))
    session.flush()
