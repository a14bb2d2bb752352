"""Prometheus request metrics in a per-app registry (several apps can live in one process)."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Histogram
from starlette.routing import BaseRoute, Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED_ROUTE = "<unmatched>"


class HttpMetrics:
    """Request count and latency labelled by route template (never the raw path: bounded cardinality)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "genenv_http_requests",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=registry,
        )
        self.latency = Histogram(
            "genenv_http_request_duration_seconds",
            "HTTP request latency by method and route template.",
            ["method", "route"],
            registry=registry,
        )


class MetricsMiddleware:
    """Observe every HTTP request after routing (the router stores the matched route in the scope)."""

    def __init__(self, app: ASGIApp, *, metrics: HttpMetrics, router: Router) -> None:
        self.app = app
        self.metrics = metrics
        self.router = router

    def _route(self, scope: Scope) -> str:
        route: BaseRoute | None = scope.get("route")
        if route is None:
            # Rejected before routing (401, 413): find the template the request was aimed at.
            partial = None
            for candidate in self.router.routes:
                match, _ = candidate.matches(scope)
                if match is Match.FULL:
                    route = candidate
                    break
                if match is Match.PARTIAL and partial is None:
                    partial = candidate
            route = route or partial
        return getattr(route, "path", None) or UNMATCHED_ROUTE

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        start = time.perf_counter()

        async def send_recording(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_recording)
        finally:
            route = self._route(scope)
            method = str(scope.get("method", ""))
            self.metrics.requests.labels(method, route, str(status)).inc()
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - start)
