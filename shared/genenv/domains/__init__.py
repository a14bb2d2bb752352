"""Domain plug-ins, looked up by name. Each module defines ``DOMAIN``, an instance of ``Domain``."""

from __future__ import annotations

import importlib

from genenv.domains.base import Domain

_MODULES: dict[str, str] = {
    "arithmetic": "genenv.domains.arithmetic",
    "function_calling": "genenv.domains.function_calling",
    "api_bank": "genenv.domains.api_bank",
    "qa": "genenv.domains.qa",
    "alfworld_step": "genenv.domains.alfworld_step",
    "travel_plan": "genenv.domains.travel_plan",
}


class UnknownDomainError(KeyError):
    """No domain of that name."""


def domain_names() -> list[str]:
    """Names accepted by get_domain."""
    return sorted(_MODULES)


def get_domain(name: str) -> Domain:
    """The domain plug-in called ``name`` (imported on first use so each process loads only what it needs)."""
    try:
        module_name = _MODULES[name]
    except KeyError:
        raise UnknownDomainError(f"unknown domain {name!r}; choose from {domain_names()}") from None
    domain = importlib.import_module(module_name).DOMAIN
    assert isinstance(domain, Domain)
    return domain
