"""The one door from a domain name to a Domain: built-in, plug-in or data-defined (``genenv domains add``).

:func:`genenv.domains.get_domain` is pure and knows built-ins and plug-ins only; a data-defined domain's seed file
lives in a database. In-process helpers (the documented verl/TRL reward functions, ``genenv domains seeds``) look a
name up here: the registry first, then — for a task payload that names its data kind (every exported task of a
data-defined domain does) — the kind's checker, which needs no database, then the stored data domains: the
embedded store ``genenv domains add`` writes and the configured database.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from genenv.domains import REGISTRY, UnknownDomainError
from genenv.domains.base import Domain
from genenv.settings import GenEnvSettings, get_settings

__all__ = ["data_domain_stores", "domain_store", "get_domain"]


def domain_store(settings: GenEnvSettings) -> Path:
    """Where the embedded commands keep data-defined domains (`genenv domains add` without a control plane): a
    SQLite file in the user's GenEnv home (paths.home), so every folder sees them; the quickstart and experiment
    homes, emptied at each start, get a copy of the domain they run."""
    return settings.paths.home / "domains.db"


def data_domain_stores(settings: GenEnvSettings | None = None) -> list[str]:
    """Database URLs that may hold data-defined domains, in the order searched: the embedded store of
    ``genenv domains add`` (when its file exists), then the configured database (a SQLite one only when its file
    exists: a lookup never creates a database)."""
    settings = settings or get_settings()
    store = domain_store(settings)
    urls: list[str] = []
    if store.is_file():
        urls.append(f"sqlite:///{store.resolve()}")
    configured = settings.database.url
    sqlite_file = _sqlite_file(configured)
    if sqlite_file is None or sqlite_file.is_file():
        sqlite_url = None if sqlite_file is None else f"sqlite:///{sqlite_file.resolve()}"
        if (sqlite_url or configured) not in urls:
            urls.append(sqlite_url or configured)
    return urls


def get_domain(
    name: str,
    payload: Mapping[str, Any] | None = None,
    *,
    stores: list[str] | None = None,
    settings: GenEnvSettings | None = None,
) -> Domain:
    """The domain called ``name``: built-in or plug-in, else the data kind ``payload`` names (scores an exported
    task without a database), else a data-defined domain stored in ``stores`` (default :func:`data_domain_stores`).
    UnknownDomainError naming where it looked otherwise."""
    try:
        return REGISTRY.get(name)
    except UnknownDomainError as exc:
        if "unavailable" in str(exc):  # a plug-in of that name that failed to load: its reason is the answer
            raise
    if payload is not None:
        try:
            return REGISTRY.for_task(name, dict(payload))
        except UnknownDomainError:
            pass
    searched = data_domain_stores(settings) if stores is None else stores
    for url in searched:
        found = _stored(url, name)
        if found is not None:
            return found
    where = ", ".join(searched) or "no domain database (none exists yet)"
    raise UnknownDomainError(
        f"unknown domain {name!r}; choose from {REGISTRY.names()} or a data-defined domain (genenv domains add); "
        f"searched {where}"
    )


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database or an in-memory SQLite)."""
    if not url.startswith("sqlite"):
        return None
    path = url.split(":///", 1)[1] if ":///" in url else ""
    return None if path in {"", ":memory:"} else Path(path)


def _stored(url: str, name: str) -> Domain | None:
    """The data-defined domain ``name`` stored in the database at ``url``, or None (also when that database is
    unreachable or has no domain table: the lookup goes on to the next store)."""
    from sqlalchemy.exc import SQLAlchemyError

    from genenv.db.engine import make_engine, make_session_factory
    from genenv.db.models import DataDomainRow
    from genenv.settings import DatabaseSettings

    engine = make_engine(DatabaseSettings(url=url))
    try:
        with make_session_factory(engine)() as session:
            row = session.get(DataDomainRow, name)
            spec = None if row is None else (row.name, row.kind, row.content, dict(row.options))
    except SQLAlchemyError:
        return None
    finally:
        engine.dispose()
    return None if spec is None else REGISTRY.data_domain(*spec)
