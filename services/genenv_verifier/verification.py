"""Verify a batch: each item through its domain's pure checker, each failure confined to its own item."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from genenv import catalogue
from genenv.catalogue import UnknownDomainError
from genenv.checkers.base import checker_time_limit, invalid_verdict, run_checker
from genenv.contracts.rollouts import Verdict, VerdictErrorKind, VerifyItem
from genenv.domains.base import Domain
from genenv.domains.data.seedfile import DATA_KIND_FIELD


def verify_items(
    items: list[VerifyItem],
    success_threshold: float | None,
    time_limit_s: float,
    lookup: Callable[[str, dict[str, Any]], Domain] = catalogue.for_task,
) -> list[Verdict]:
    """Verdicts in item order. An unknown domain, a checker that raises or one that times out invalidates only
    its own item (the time limit wraps every domain's verify, whether or not the domain limits itself).

    Domains come from the catalogue; a data-defined domain (its seed file is in the database, which the verifier
    does not read) is found by the kind its task payload names."""
    domains: dict[tuple[str, str | None], Domain | None] = {}
    verdicts: list[Verdict] = []
    with checker_time_limit(time_limit_s):
        for item in items:
            kind = item.task.get(DATA_KIND_FIELD)
            key = (item.domain, kind if isinstance(kind, str) else None)
            if key not in domains:
                try:
                    domains[key] = lookup(item.domain, item.task)
                except UnknownDomainError:
                    domains[key] = None
            domain = domains[key]
            if domain is None:
                verdicts.append(invalid_verdict(VerdictErrorKind.TASK_ERROR, f"unknown domain {item.domain!r}"))
                continue
            verdicts.append(run_checker(partial(domain.verify, item.task, item.response, success_threshold)))
    return verdicts
