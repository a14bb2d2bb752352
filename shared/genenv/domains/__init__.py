"""Task families, looked up by name in the one registry (:mod:`genenv.domains.registry`).

Built-in families each define ``DOMAIN``, an instance of ``Domain``; plug-ins come from the ``genenv.domains``
entry-point group; data-defined domains are built from a user's seed file (:mod:`genenv.domains.data`).
"""

from __future__ import annotations

from genenv.domains.base import Domain
from genenv.domains.registry import REGISTRY, UnknownDomainError

__all__ = ["REGISTRY", "Domain", "UnknownDomainError", "domain_names", "get_domain"]


def domain_names() -> list[str]:
    """Names of the built-in and working plug-in domains (data-defined ones are listed from the database)."""
    return REGISTRY.names()


def get_domain(name: str) -> Domain:
    """The built-in or plug-in domain called ``name`` (imported on first use)."""
    return REGISTRY.get(name)
