"""Tenants: who a request acts for, and what it may see (issue 33).

A tenant token (auth.tenant_tokens) acts for one tenant: it creates runs and experiments owned by that tenant and
sees only those. A service/admin token (auth.tokens), and every request while auth is off (the embedded default),
acts for the default tenant and sees every tenant's objects. Pure: no database, no HTTP.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_TENANT = "default"
"""The tenant of every object created by a service token or with auth off, and of every row made before tenants."""
TENANT_NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
"""Tenant names: lowercase letters, digits, '.', '_' and '-', at most 64 characters (the tenant column's width)."""
_TENANT_NAME = re.compile(TENANT_NAME_PATTERN)


def check_tenant_name(name: str) -> str:
    """``name`` when it is a valid tenant name, else ValueError naming the rule."""
    if not _TENANT_NAME.match(name):
        raise ValueError(
            f"tenant name {name!r} is not valid: use 1-64 lowercase letters, digits, '.', '_' or '-', starting with "
            "a letter or digit"
        )
    return name


@dataclass(frozen=True)
class Caller:
    """Who a request acts for: ``tenant`` owns what it creates; ``all_tenants`` sees every tenant's objects."""

    tenant: str
    all_tenants: bool

    @property
    def limited(self) -> bool:
        """A tenant token: its tenant's limits apply and it sees only its tenant's objects."""
        return not self.all_tenants


SERVICE = Caller(DEFAULT_TENANT, all_tenants=True)
"""A service/admin token, or any request while auth is off."""


def tenant_caller(tenant: str) -> Caller:
    """The caller a tenant token stands for."""
    return Caller(tenant, all_tenants=False)
