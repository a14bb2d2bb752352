"""Data-defined domains: register (checked, size-bounded), list, and resolve a name to its Domain."""

from __future__ import annotations

import hashlib

from sqlalchemy import select
from sqlalchemy.orm import Session

from genenv.contracts.domains import DomainCreate, DomainInfo
from genenv.contracts.errors import ConflictError, GenEnvError, NotFoundError
from genenv.contracts.runs import RunConfig, heldout_domain
from genenv.db.models import DataDomainRow
from genenv.domains import REGISTRY, UnknownDomainError
from genenv.domains.base import Domain
from genenv.domains.data.domain import check_seed_file
from genenv.domains.data.seedfile import SeedFileReport, check_options

_LISTED_IN_MESSAGE = 20


class SeedFileTooLargeError(GenEnvError):
    """The seed file is over the size limit."""

    status_code = 413
    type = "request_too_large_error"


class SeedFileRejectedError(GenEnvError):
    """The seed file has bad rows; the message lists them as ``line N: reason``."""

    status_code = 422


def report_message(report: SeedFileReport) -> str:
    """The report as one message: the summary, then the first bad rows."""
    shown = report.errors[:_LISTED_IN_MESSAGE]
    more = report.error_count - len(shown)
    lines = [str(e) for e in shown] + ([f"... and {more} more"] if more > 0 else [])
    return f"seed file rejected ({report.summary()}): " + "; ".join(lines)


def add(session: Session, body: DomainCreate, *, max_bytes: int) -> DataDomainRow:
    """Check and store a data-defined domain; re-registering the same file under the same name is a no-op."""
    if REGISTRY.is_static(body.name) or any(e.name == body.name for e in REGISTRY.entries()):
        raise ConflictError(f"{body.name!r} is a built-in or plug-in domain; choose another name",
                            param="name", code="domain_exists")
    try:
        _, report = check_seed_file(body.name, body.kind, body.content, body.options, max_bytes=max_bytes)
    except ValueError as exc:
        raise GenEnvError(str(exc), param="options", code="invalid_options") from None
    if not report.ok:
        too_large = any(e.line == 0 and e.reason.startswith("over the size limit") for e in report.errors)
        cls = SeedFileTooLargeError if too_large else SeedFileRejectedError
        raise cls(report_message(report), param="content", code="seed_file_too_large" if too_large
                  else "invalid_seed_file")
    digest = hashlib.sha256(body.content.encode()).hexdigest()
    existing = session.get(DataDomainRow, body.name)
    if existing is not None:
        if existing.sha256 == digest and existing.kind == body.kind and existing.options == report_options(body):
            return existing
        raise ConflictError(f"a data-defined domain {body.name!r} already exists with another seed file; choose "
                            "another name (a name keeps the tasks it was run with)", param="name",
                            code="domain_exists")
    row = DataDomainRow(name=body.name, kind=body.kind, options=report_options(body), content=body.content,
                        sha256=digest, train_rows=len(report.train), eval_rows=len(report.eval))
    session.add(row)
    session.flush()
    return row


def report_options(body: DomainCreate) -> dict[str, object]:
    """The options with their defaults (what the domain runs with)."""
    return check_options(body.kind, body.options)


def to_info(row: DataDomainRow) -> DomainInfo:
    """The wire form of a data-defined domain."""
    return DomainInfo(name=row.name, source="data", origin="seed file", kind=row.kind, options=dict(row.options),
                      train_rows=row.train_rows, eval_rows=row.eval_rows, sha256=row.sha256,
                      created_at=row.created_at)


def list_all(session: Session) -> list[DomainInfo]:
    """Built-in and plug-in domains (failed ones with their reason), then the data-defined ones by name."""
    static = [DomainInfo(name=e.name, source=e.source, ok=e.ok, reason=e.reason, origin=e.origin)
              for e in REGISTRY.entries()]
    rows = session.scalars(select(DataDomainRow).order_by(DataDomainRow.name))
    return static + [to_info(r) for r in rows]


def get_info(session: Session, name: str) -> DomainInfo:
    """One domain's listing, or NotFoundError."""
    for info in list_all(session):
        if info.name == name:
            return info
    raise NotFoundError(f"no domain {name!r}", param="name", code="unknown_domain")


def resolve(session: Session, name: str, *, param: str = "domain") -> Domain:
    """The Domain called ``name``: built-in, plug-in or data-defined (from its stored seed file); NotFoundError
    naming the known ones otherwise."""
    try:
        return REGISTRY.get(name)
    except UnknownDomainError as exc:
        row = session.get(DataDomainRow, name)
        if row is None:
            known = [*REGISTRY.names(), *session.scalars(select(DataDomainRow.name).order_by(DataDomainRow.name))]
            message = str(exc) if "unavailable" in str(exc) else f"unknown domain {name!r}; choose from {known}"
            raise NotFoundError(message, param=param, code="unknown_domain") from None
    return REGISTRY.data_domain(row.name, row.kind, row.content, dict(row.options))


def check_config_domains(session: Session, config: RunConfig, *, param: str) -> None:
    """NotFoundError unless the config's domain and every ``domain:NAME`` it evaluates on exist (the contract checks
    only their form: it sits below the registry and the database)."""
    resolve(session, config.domain, param=f"{param}.domain")
    for benchmark in config.eval_benchmarks:
        if (name := heldout_domain(benchmark)) is not None:
            resolve(session, name, param=f"{param}.eval_benchmarks")
