"""Typed client of the simulator service (the live task generator)."""

from __future__ import annotations

from genenv.clients.base import ServiceClient
from genenv.contracts.tasks import GenerateRequest, GenerateResponse


class SimulatorClient(ServiceClient):
    """POST /v1/tasks:generate. Not retried (not idempotent without run_id); generation can take minutes."""

    service = "simulator"

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        """Accepted and rejected tasks with reasons; stored when the request names a run and epoch."""
        return await self.request("POST", "/v1/tasks:generate", GenerateResponse, body=request)
