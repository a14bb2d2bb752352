"""The one door from a domain name to a Domain, for every process: built-in, plug-in or data-defined.

Three ways in, one order of search (the registry's built-ins and plug-ins first, a plug-in that failed to load
answering with its reason):

- :func:`resolve` — with a database session (control plane, simulator, verifier routes, orchestrator): then the
  data-defined domains stored in that database; NotFoundError naming the known ones otherwise.
- :func:`for_task` — without a database, for one task payload (verifier checks, rollout prompts, exports): then the
  data kind the payload names (every task of a data-defined domain names it), which needs no seed file.
- :func:`get_domain` — in-process helpers (the documented verl/TRL reward functions, ``genenv domains seeds``):
  :func:`for_task` when a payload is given, then the stores: the embedded one ``genenv domains add`` writes
  (:func:`domain_store`) and the configured database.

Registering a data-defined domain (:func:`add`: the name free, the seed file checked, 413 over the size limit, 422
for bad rows) and listing every domain happen here too; the database layer (``db.repositories.data_domains``) only
stores rows. The database is imported on first use: the CLI imports this module for :func:`domain_store`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from genenv.contracts.domains import DomainCreate, DomainInfo
from genenv.contracts.errors import ConflictError, GenEnvError, NotFoundError, TooLargeError, UnprocessableError
from genenv.contracts.runs import RunConfig, heldout_domain
from genenv.domains import REGISTRY, UnknownDomainError
from genenv.domains.base import Domain
from genenv.domains.registry import UnavailableDomainError
from genenv.settings import GenEnvSettings, get_settings

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from genenv.db.models import DataDomainRow
    from genenv.domains.data.seedfile import SeedFileReport

__all__ = [
    "UnknownDomainError", "add", "check_config_domains", "data_domain_stores", "domain_store", "for_task",
    "get_domain", "get_info", "is_static", "list_all", "names", "report_message", "resolve", "stored_body",
    "stored_names", "to_info",
]

_LISTED_IN_MESSAGE = 20
T = TypeVar("T")


# --- built-ins and plug-ins: no database --------------------------------------------------------------------------


def names() -> list[str]:
    """Names of the built-in and working plug-in domains (data-defined ones live in a database)."""
    return REGISTRY.names()


def is_static(name: str) -> bool:
    """Whether ``name`` is a built-in or a working plug-in domain."""
    return REGISTRY.is_static(name)


def for_task(name: str, payload: Mapping[str, Any]) -> Domain:
    """The domain to prompt for or score one task without a database: by name, else by the data kind its payload
    names; UnknownDomainError otherwise."""
    return REGISTRY.for_task(name, dict(payload))


# --- with a database session ----------------------------------------------------------------------------------------


def resolve(session: Session, name: str, *, param: str = "domain") -> Domain:
    """The Domain called ``name``: built-in, plug-in or data-defined (from its stored seed file); NotFoundError
    naming the known ones otherwise."""
    from genenv.db.repositories import data_domains

    try:
        return REGISTRY.get(name)
    except UnavailableDomainError as exc:  # its reason is the answer; no database is read
        raise NotFoundError(str(exc), param=param, code="unknown_domain") from None
    except UnknownDomainError:
        pass
    row = data_domains.get(session, name)
    if row is None:
        known = [*REGISTRY.names(), *data_domains.names(session)]
        raise NotFoundError(f"unknown domain {name!r}; choose from {known}", param=param,
                            code="unknown_domain")
    return _built(row)


def check_config_domains(session: Session, config: RunConfig, *, param: str) -> None:
    """NotFoundError unless the config's domain and every ``domain:NAME`` it evaluates on exist (the contract checks
    only their form: it sits below the registry and the database)."""
    resolve(session, config.domain, param=f"{param}.domain")
    for benchmark in config.eval_benchmarks:
        if (name := heldout_domain(benchmark)) is not None:
            resolve(session, name, param=f"{param}.eval_benchmarks")


def add(session: Session, body: DomainCreate, *, max_bytes: int) -> DomainInfo:
    """Check and store a data-defined domain; re-registering the same file under the same name is a no-op.
    ConflictError for a taken name, GenEnvError for bad options, TooLargeError (413) over ``max_bytes``,
    UnprocessableError (422) listing the bad rows."""
    from genenv.db.repositories import data_domains
    from genenv.domains.data.domain import check_seed_file
    from genenv.domains.data.seedfile import check_options

    if REGISTRY.is_static(body.name) or any(e.name == body.name for e in REGISTRY.entries()):
        raise ConflictError(f"{body.name!r} is a built-in or plug-in domain; choose another name",
                            param="name", code="domain_exists")
    try:
        _, report = check_seed_file(body.name, body.kind, body.content, body.options, max_bytes=max_bytes)
    except ValueError as exc:
        raise GenEnvError(str(exc), param="options", code="invalid_options") from None
    if not report.ok:
        if any(e.line == 0 and e.reason.startswith("over the size limit") for e in report.errors):
            raise TooLargeError(report_message(report), param="content", code="seed_file_too_large")
        raise UnprocessableError(report_message(report), param="content", code="invalid_seed_file")
    digest = hashlib.sha256(body.content.encode()).hexdigest()
    options = check_options(body.kind, body.options)  # with their defaults: what the domain runs with
    existing = data_domains.get(session, body.name)
    if existing is not None:
        if existing.sha256 == digest and existing.kind == body.kind and existing.options == options:
            return to_info(existing)
        raise ConflictError(f"a data-defined domain {body.name!r} already exists with another seed file; choose "
                            "another name (a name keeps the tasks it was run with)", param="name",
                            code="domain_exists")
    return to_info(data_domains.insert(session, name=body.name, kind=body.kind, options=options,
                                       content=body.content, sha256=digest, train_rows=len(report.train),
                                       eval_rows=len(report.eval)))


def report_message(report: SeedFileReport) -> str:
    """A seed file's report as one message: the summary, then the first bad rows."""
    shown = report.errors[:_LISTED_IN_MESSAGE]
    more = report.error_count - len(shown)
    lines = [str(e) for e in shown] + ([f"... and {more} more"] if more > 0 else [])
    return f"seed file rejected ({report.summary()}): " + "; ".join(lines)


def to_info(row: DataDomainRow) -> DomainInfo:
    """The wire form of a data-defined domain."""
    return DomainInfo(name=row.name, source="data", origin="seed file", kind=row.kind, options=dict(row.options),
                      train_rows=row.train_rows, eval_rows=row.eval_rows, sha256=row.sha256,
                      created_at=row.created_at)


def list_all(session: Session) -> list[DomainInfo]:
    """Built-in and plug-in domains (failed ones with their reason), then the data-defined ones by name."""
    from genenv.db.repositories import data_domains

    static = [DomainInfo(name=e.name, source=e.source, ok=e.ok, reason=e.reason, origin=e.origin)
              for e in REGISTRY.entries()]
    return static + [to_info(r) for r in data_domains.list_all(session)]


def get_info(session: Session, name: str) -> DomainInfo:
    """One domain's listing, or NotFoundError."""
    for info in list_all(session):
        if info.name == name:
            return info
    raise NotFoundError(f"no domain {name!r}", param="name", code="unknown_domain")


def _built(row: DataDomainRow) -> Domain:
    """The Domain of a stored data-defined domain (built once per seed file)."""
    return REGISTRY.data_domain(row.name, row.kind, row.content, dict(row.options))


# --- in-process helpers: the stores a name may be in ----------------------------------------------------------------


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
    except UnavailableDomainError:  # a plug-in of that name that failed to load: its reason is the answer
        raise
    except UnknownDomainError:
        pass
    if payload is not None:
        try:
            return for_task(name, payload)
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


def stored_names(url: str) -> list[str]:
    """Names of the data-defined domains in the database at ``url`` (none when it is unreachable, has no domain
    table, or is a SQLite file that does not exist: a lookup never creates a database)."""
    sqlite_file = _sqlite_file(url)
    if sqlite_file is not None and not sqlite_file.is_file():
        return []
    from genenv.db.repositories import data_domains

    return _in_store(url, data_domains.names) or []


def stored_body(url: str, name: str) -> DomainCreate | None:
    """The registration of the data-defined domain ``name`` stored in the database at ``url`` (to register it in
    another database: an embedded home carries the user's domain this way), or None."""
    from genenv.db.repositories import data_domains

    def body(session: Session) -> DomainCreate | None:
        row = data_domains.get(session, name)
        return None if row is None else DomainCreate.model_validate(
            {"name": row.name, "kind": row.kind, "content": row.content, "options": dict(row.options)})

    return _in_store(url, body)


def _sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database or an in-memory SQLite)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in {None, "", ":memory:"}:
        return None
    return Path(str(parsed.database))


def _stored(url: str, name: str) -> Domain | None:
    """The data-defined domain ``name`` stored in the database at ``url``, or None (also when that database is
    unreachable or has no domain table: the lookup goes on to the next store)."""
    from genenv.db.repositories import data_domains

    def found(session: Session) -> Domain | None:
        row = data_domains.get(session, name)
        return None if row is None else _built(row)

    return _in_store(url, found)


def _in_store(url: str, read: Callable[[Session], T]) -> T | None:
    """``read`` in a session on the database at ``url``; None when that database is unreachable or lacks the
    table."""
    from sqlalchemy.exc import SQLAlchemyError

    from genenv.db.engine import make_engine, make_session_factory
    from genenv.settings import DatabaseSettings

    engine = make_engine(DatabaseSettings(url=url))
    try:
        with make_session_factory(engine)() as session:
            return read(session)
    except SQLAlchemyError:
        return None
    finally:
        engine.dispose()
