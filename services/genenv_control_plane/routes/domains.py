"""Domains: list every domain (built-in, plug-in, data-defined) and register a data-defined one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from genenv import catalogue
from genenv.contracts.domains import DOMAIN_NAME_PATTERN, DomainCreate, DomainInfo, DomainList
from genenv_control_plane.deps import ControlPlaneDep

router = APIRouter(prefix="/v1/domains", tags=["domains"])
DomainName = Annotated[str, Path(max_length=48, pattern=DOMAIN_NAME_PATTERN, description="Domain name.")]


@router.post("", status_code=201, summary="Register a data-defined domain from a seed file")
def create_domain(body: DomainCreate, cp: ControlPlaneDep) -> DomainInfo:
    """Check the seed file (every bad row as `line N: reason`, 422; over the size limit, 413) and store it; the name
    is then usable like a built-in one. Registering the same file under the same name again returns it."""
    with cp.transaction() as session:
        return catalogue.add(session, body, max_bytes=cp.settings.domains.max_seed_file_bytes)


@router.get("", summary="List built-in, plug-in and data-defined domains")
def list_domains(cp: ControlPlaneDep) -> DomainList:
    """Every domain; a plug-in that failed to load is listed with its reason."""
    with cp.transaction() as session:
        return DomainList(items=catalogue.list_all(session))


@router.get("/{name}", summary="Show a domain")
def get_domain(name: DomainName, cp: ControlPlaneDep) -> DomainInfo:
    """One domain's listing (404 when there is none)."""
    with cp.transaction() as session:
        return catalogue.get_info(session, name)
