"""Typed client of the verifier service (batch verification and benchmark evaluation)."""

from __future__ import annotations

from urllib.parse import quote

import httpx

from genenv.clients.base import ServiceClient
from genenv.contracts.adapters import EvaluateRequest, Evaluation
from genenv.contracts.rollouts import VerifyRequest, VerifyResponse

EVALUATE_TIMEOUT_S = 6 * 3600.0
"""Default read timeout: a benchmark run answers when it is done (minutes on a GPU, hours for a full CPU run)."""


class VerifierClient(ServiceClient):
    """Verdicts for (task, response) batches; benchmark evaluations."""

    service = "verifier"

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout_s: float = EVALUATE_TIMEOUT_S,
        connect_timeout_s: float = 5.0,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            token=token,
            timeout_s=timeout_s,
            connect_timeout_s=connect_timeout_s,
            retries=retries,
            transport=transport,
        )

    async def verify(self, request: VerifyRequest) -> VerifyResponse:
        """POST /v1/verify: verdicts in request order (at most 4096 items per call)."""
        return await self.request("POST", "/v1/verify", VerifyResponse, body=request)

    async def evaluate(self, benchmark: str, request: EvaluateRequest) -> Evaluation:
        """POST /v1/benchmarks/{name}/evaluate: run, store and return one evaluation (long-running; not retried)."""
        return await self.request(
            "POST", f"/v1/benchmarks/{quote(benchmark, safe='')}/evaluate", Evaluation, body=request
        )
