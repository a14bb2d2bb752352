"""Liveness, readiness and metrics endpoints every service gets."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Literal

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from genenv.contracts.errors import ErrorEnvelope, UnavailableError

log = logging.getLogger(__name__)

ReadyCheck = Callable[[], Awaitable[None] | None]
"""A readiness probe: returns (or awaits to) None when the dependency answers, raises otherwise."""

READY_CHECK_TIMEOUT_S = 5.0
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class Health(BaseModel):
    """Liveness answer."""

    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    """Readiness answer: every check passed."""

    status: Literal["ready"] = "ready"
    checks: dict[str, Literal["ok"]]


async def _run_check(check: ReadyCheck) -> None:
    # Sync checks (a blocking DB ping) run in the threadpool so they cannot stall the event loop.
    result = check() if inspect.iscoroutinefunction(check) else await run_in_threadpool(check)
    if inspect.isawaitable(result):
        await result


def health_router(ready_checks: Mapping[str, ReadyCheck], registry: CollectorRegistry) -> APIRouter:
    """``/healthz`` (process alive), ``/readyz`` (dependencies answer, else 503), ``/metrics``."""
    router = APIRouter(tags=["health"])

    @router.get("/healthz", response_model=Health, summary="Liveness probe")
    async def healthz() -> Health:
        return Health()

    @router.get(
        "/readyz",
        response_model=Readiness,
        summary="Readiness probe (checks dependencies)",
        responses={503: {"model": ErrorEnvelope, "description": "A dependency does not answer"}},
    )
    async def readyz() -> Readiness:
        failed: list[str] = []
        for name, check in ready_checks.items():
            try:
                await asyncio.wait_for(_run_check(check), READY_CHECK_TIMEOUT_S)
            except Exception as exc:
                # The class name tells the operator what failed; details (hosts, users) stay in the log.
                log.warning("readiness check %s failed: %r", name, exc)
                failed.append(f"{name} ({type(exc).__name__})")
        if failed:
            raise UnavailableError(f"not ready: {', '.join(failed)}", code="not_ready")
        return Readiness(checks=dict.fromkeys(ready_checks, "ok"))

    @router.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return router
