"""Typed client of the control-plane API."""

from __future__ import annotations

from urllib.parse import quote

from genenv.clients.base import ServiceClient
from genenv.contracts.adapters import Adapter, Evaluation, Role
from genenv.contracts.domains import DomainCreate, DomainInfo, DomainList
from genenv.contracts.epochs import Epoch
from genenv.contracts.experiments import Experiment, ExperimentAction, ExperimentCreate, ExperimentSeries
from genenv.contracts.pagination import Page
from genenv.contracts.rollouts import Rollout
from genenv.contracts.runs import Run, RunAction, RunConfig, RunCreate, RunStatus
from genenv.contracts.scores import RunStat, StatKind
from genenv.contracts.tasks import Task, TaskStatus


def _seg(value: str) -> str:
    """A path segment with '/', '?' and '#' escaped, so an id can never address another route."""
    return quote(value, safe="")


class ControlPlaneClient(ServiceClient):
    """Runs, experiments and their inspection endpoints."""

    service = "control plane"

    async def create_run(self, config: RunConfig) -> Run:
        """POST /v1/runs."""
        return await self.request("POST", "/v1/runs", Run, body=RunCreate(config=config))

    async def list_runs(
        self, *, status: RunStatus | None = None, cursor: str | None = None, limit: int | None = None
    ) -> Page[Run]:
        """GET /v1/runs (newest first)."""
        return await self.request(
            "GET", "/v1/runs", Page[Run], params={"status": status, "cursor": cursor, "limit": limit}
        )

    async def create_domain(self, body: DomainCreate) -> DomainInfo:
        """POST /v1/domains (register a data-defined domain)."""
        return await self.request("POST", "/v1/domains", DomainInfo, body=body)

    async def list_domains(self) -> DomainList:
        """GET /v1/domains."""
        return await self.request("GET", "/v1/domains", DomainList)

    async def get_run(self, run_id: str) -> Run:
        """GET /v1/runs/{id}."""
        return await self.request("GET", f"/v1/runs/{_seg(run_id)}", Run)

    async def act(self, run_id: str, action: RunAction) -> Run:
        """POST /v1/runs/{id}/{start|pause|resume|cancel}."""
        return await self.request("POST", f"/v1/runs/{_seg(run_id)}/{action}", Run)

    async def list_epochs(self, run_id: str, *, cursor: str | None = None, limit: int | None = None) -> Page[Epoch]:
        """GET /v1/runs/{id}/epochs."""
        return await self.request(
            "GET", f"/v1/runs/{_seg(run_id)}/epochs", Page[Epoch], params={"cursor": cursor, "limit": limit}
        )

    async def list_tasks(
        self,
        run_id: str,
        *,
        epoch: int | None = None,
        seed_id: str | None = None,
        status: TaskStatus | None = None,
        domain: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[Task]:
        """GET /v1/runs/{id}/tasks."""
        params = {"epoch": epoch, "seed_id": seed_id, "status": status, "domain": domain}
        return await self.request(
            "GET", f"/v1/runs/{_seg(run_id)}/tasks", Page[Task], params={**params, "cursor": cursor, "limit": limit}
        )

    async def list_rollouts(
        self,
        run_id: str,
        *,
        task_id: int | None = None,
        epoch: int | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[Rollout]:
        """GET /v1/runs/{id}/rollouts."""
        params = {"task_id": task_id, "epoch": epoch, "cursor": cursor, "limit": limit}
        return await self.request("GET", f"/v1/runs/{_seg(run_id)}/rollouts", Page[Rollout], params=params)

    async def list_stats(
        self,
        run_id: str,
        *,
        kind: StatKind = StatKind.SEED,
        epoch: int | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[RunStat]:
        """GET /v1/runs/{id}/stats."""
        params = {"kind": kind, "epoch": epoch, "cursor": cursor, "limit": limit}
        return await self.request("GET", f"/v1/runs/{_seg(run_id)}/stats", Page[RunStat], params=params)

    async def list_adapters(
        self, run_id: str, *, role: Role | None = None, cursor: str | None = None, limit: int | None = None
    ) -> Page[Adapter]:
        """GET /v1/runs/{id}/adapters."""
        params = {"role": role, "cursor": cursor, "limit": limit}
        return await self.request("GET", f"/v1/runs/{_seg(run_id)}/adapters", Page[Adapter], params=params)

    async def list_evaluations(
        self,
        run_id: str,
        *,
        benchmark: str | None = None,
        epoch: int | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> Page[Evaluation]:
        """GET /v1/runs/{id}/evaluations."""
        params = {"benchmark": benchmark, "epoch": epoch, "cursor": cursor, "limit": limit}
        return await self.request("GET", f"/v1/runs/{_seg(run_id)}/evaluations", Page[Evaluation], params=params)

    async def create_experiment(self, body: ExperimentCreate) -> Experiment:
        """POST /v1/experiments."""
        return await self.request("POST", "/v1/experiments", Experiment, body=body)

    async def list_experiments(self, *, cursor: str | None = None, limit: int | None = None) -> Page[Experiment]:
        """GET /v1/experiments (newest first)."""
        return await self.request(
            "GET", "/v1/experiments", Page[Experiment], params={"cursor": cursor, "limit": limit}
        )

    async def get_experiment(self, experiment_id: str) -> Experiment:
        """GET /v1/experiments/{id}."""
        return await self.request("GET", f"/v1/experiments/{_seg(experiment_id)}", Experiment)

    async def experiment_series(self, experiment_id: str) -> ExperimentSeries:
        """GET /v1/experiments/{id}/series."""
        return await self.request("GET", f"/v1/experiments/{_seg(experiment_id)}/series", ExperimentSeries)

    async def act_experiment(self, experiment_id: str, action: ExperimentAction) -> Experiment:
        """POST /v1/experiments/{id}/{start|cancel}."""
        return await self.request("POST", f"/v1/experiments/{_seg(experiment_id)}/{action}", Experiment)
