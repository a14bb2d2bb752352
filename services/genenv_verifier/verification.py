"""Verify a batch: each item through its domain's pure checker, each failure confined to its own item."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from genenv.checkers.base import checker_time_limit, invalid_verdict, run_checker
from genenv.contracts.rollouts import Verdict, VerdictErrorKind, VerifyItem
from genenv.domains import UnknownDomainError, get_domain
from genenv.domains.base import Domain


def verify_items(
    items: list[VerifyItem],
    success_threshold: float | None,
    time_limit_s: float,
    lookup: Callable[[str], Domain] = get_domain,
) -> list[Verdict]:
    """Verdicts in item order. An unknown domain, a checker that raises or one that times out invalidates only
    its own item (the time limit wraps every domain's verify, whether or not the domain limits itself)."""
    domains: dict[str, Domain | None] = {}
    verdicts: list[Verdict] = []
    with checker_time_limit(time_limit_s):
        for item in items:
            if item.domain not in domains:
                try:
                    domains[item.domain] = lookup(item.domain)
                except UnknownDomainError:
                    domains[item.domain] = None
            domain = domains[item.domain]
            if domain is None:
                verdicts.append(invalid_verdict(VerdictErrorKind.TASK_ERROR, f"unknown domain {item.domain!r}"))
                continue
            verdicts.append(run_checker(partial(domain.verify, item.task, item.response, success_threshold)))
    return verdicts
