"""``make_app``: the one way every GenEnv HTTP service is assembled."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from fastapi import APIRouter, Depends, FastAPI
from fastapi.security import HTTPBearer
from prometheus_client import CollectorRegistry
from starlette.types import Lifespan

from genenv import __version__
from genenv.contracts.errors import GenEnvError
from genenv.http.auth import Authenticator
from genenv.http.errors import ERROR_RESPONSES, install_error_handlers
from genenv.http.health import PUBLIC_PATHS, ReadyCheck, health_router
from genenv.http.metrics import HttpMetrics, MetricsMiddleware
from genenv.http.middleware import BearerAuthMiddleware, BodyLimitMiddleware, RequestContextMiddleware
from genenv.settings import GenEnvSettings

# Only documents the scheme in OpenAPI; the middleware enforces it (auto_error=False: never raises here).
_bearer_doc = HTTPBearer(
    auto_error=False, description="A token from GENENV_AUTH__TOKENS or GENENV_AUTH__TENANT_TOKENS."
)


class AuthRequiredError(GenEnvError):
    """auth.required is on but no token is configured: the service refuses to start rather than run open."""


def make_app(
    title: str,
    settings: GenEnvSettings,
    *,
    routers: Sequence[APIRouter],
    lifespan: Lifespan[FastAPI] | None = None,
    ready_checks: Mapping[str, ReadyCheck] | None = None,
    public_paths: Iterable[str] = (),
    tenants: bool = False,
) -> FastAPI:
    """A FastAPI app with error envelope, bearer auth, body limit, request ids, health probes, metrics.

    ``public_paths`` (exact paths) are served without a token besides the probes; only for content that carries
    no data, such as the dashboard's static shell. ``tenants``: the service accepts tenant tokens
    (auth.tenant_tokens) and keeps each tenant to its own runs (genenv.tenancy); the others accept only auth.tokens.
    """
    tokens = [t for t in (s.get_secret_value() for s in settings.auth.tokens) if t]
    # auth.required asks for a service token: the services call each other with one (a tenant token cannot).
    if settings.auth.required and not tokens:
        raise AuthRequiredError(
            f"{title}: auth.required is on but GENENV_AUTH__TOKENS is empty; set it (.env for compose, "
            "Secret genenv-secrets in Kubernetes) or set GENENV_AUTH__REQUIRED=false for a deliberately open service",
            param="auth.tokens",
        )
    registry = CollectorRegistry()
    app = FastAPI(title=title, version=__version__, lifespan=lifespan)
    # add_middleware puts each one outside the previous: body limit innermost, metrics outermost, so metrics
    # see every response (incl. 401/413/500) and the request id is on all of them.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    authenticator = Authenticator.from_settings(settings.auth, tenants=tenants)
    app.add_middleware(
        BearerAuthMiddleware, authenticator=authenticator, public_paths=PUBLIC_PATHS | frozenset(public_paths)
    )
    app.add_middleware(RequestContextMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=HttpMetrics(registry), router=app.router)
    install_error_handlers(app)
    app.include_router(health_router(ready_checks or {}, registry))
    auth_doc = [Depends(_bearer_doc)] if authenticator.enabled else []
    for router in routers:
        app.include_router(router, responses=ERROR_RESPONSES, dependencies=auth_doc)
    app.state.metrics_registry = registry
    return app
