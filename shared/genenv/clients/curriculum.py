"""Typed client of the curriculum service (α-curriculum scores and the difficulty ledger)."""

from __future__ import annotations

from urllib.parse import quote

from genenv.clients.base import ServiceClient
from genenv.contracts.pagination import Page
from genenv.contracts.scores import ScoreRequest, ScoreResponse, SeedLedgerEntry, TaskLedgerEntry


def _seg(value: str) -> str:
    """A path segment with '/', '?' and '#' escaped, so an id can never address another route."""
    return quote(value, safe="")


class CurriculumClient(ServiceClient):
    """Score seed batches and read the ledger."""

    service = "curriculum"

    async def score(self, request: ScoreRequest) -> ScoreResponse:
        """POST /v1/score: a stored run epoch (its scores are upserted) or raw counts (nothing stored)."""
        return await self.request("POST", "/v1/score", ScoreResponse, body=request)

    async def stored_scores(self, run_id: str, epoch: int) -> ScoreResponse:
        """GET the stored scores of one epoch (empty before the epoch is scored)."""
        return await self.request("GET", f"/v1/runs/{_seg(run_id)}/epochs/{epoch}/scores", ScoreResponse)

    async def task_ledger(
        self,
        run_id: str,
        *,
        epoch: int | None = None,
        seed_id: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[TaskLedgerEntry]:
        """One page of the per-task ledger (ordered by task id)."""
        return await self.request(
            "GET",
            f"/v1/runs/{_seg(run_id)}/ledger/tasks",
            Page[TaskLedgerEntry],
            params={"epoch": epoch, "seed_id": seed_id, "cursor": cursor, "limit": limit},
        )

    async def seed_ledger(
        self, run_id: str, *, cursor: str | None = None, limit: int | None = None
    ) -> Page[SeedLedgerEntry]:
        """One page of the per-seed ledger over all epochs (ordered by seed id)."""
        return await self.request(
            "GET", f"/v1/runs/{_seg(run_id)}/ledger/seeds", Page[SeedLedgerEntry],
            params={"cursor": cursor, "limit": limit},
        )
