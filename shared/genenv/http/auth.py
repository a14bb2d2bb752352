"""Which caller a bearer token stands for: the one place a request's tenant is decided.

The auth middleware asks ``Authenticator.identify`` and keeps the answer in the ASGI scope; routes read it through
``caller_of`` (the control plane's and the simulator's ``Caller`` dependency). Nothing else maps tokens to tenants.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from typing import Annotated

from fastapi import Depends
from starlette.requests import HTTPConnection, Request

from genenv.settings import AuthSettings
from genenv.tenancy import SERVICE, Caller, tenant_caller

CALLER_SCOPE_KEY = "genenv.caller"
"""Where the middleware leaves the request's Caller in the ASGI scope."""


class Authenticator:
    """Service/admin tokens (every tenant) and tenant tokens (one tenant each)."""

    def __init__(self, service_tokens: Iterable[str], tenant_tokens: Mapping[str, str]) -> None:
        self._tokens: list[tuple[bytes, Caller]] = [(t.encode(), SERVICE) for t in service_tokens if t]
        self._tokens += [(t.encode(), tenant_caller(name)) for t, name in tenant_tokens.items() if t]

    @classmethod
    def from_settings(cls, auth: AuthSettings, *, tenants: bool) -> Authenticator:
        """The tokens of ``auth``: auth.tokens, and auth.tenant_tokens when the service isolates tenants
        (``tenants``); a service that does not answers a tenant token with 403."""
        return cls(
            [s.get_secret_value() for s in auth.tokens],
            {k.get_secret_value(): v for k, v in auth.tenant_tokens.items()} if tenants else {},
        )

    @property
    def enabled(self) -> bool:
        """Whether any token is configured (no tokens = auth off, everything is the default tenant)."""
        return bool(self._tokens)

    def identify(self, credential: str) -> Caller | None:
        """The caller ``credential`` stands for, or None when it is no configured token."""
        given = credential.encode()
        found: Caller | None = None
        # Compare against every token (no early exit) so timing does not reveal which one is close.
        for token, caller in self._tokens:
            if hmac.compare_digest(given, token):
                found = caller
        return found


def caller_of(connection: HTTPConnection) -> Caller:
    """The caller the auth middleware identified; with auth off (or on a public path), the service caller."""
    caller = connection.scope.get(CALLER_SCOPE_KEY)
    return caller if isinstance(caller, Caller) else SERVICE


async def get_caller(request: Request) -> Caller:
    """Who the request acts for, as a route dependency (``async``: no thread hop for a dict lookup)."""
    return caller_of(request)


CallerDep = Annotated[Caller, Depends(get_caller)]
