"""The run-mode table (genenv.contracts.modes), for clients and the dashboard: one source for every mode's
behaviour, report label and colour."""

from __future__ import annotations

from fastapi import APIRouter

from genenv.contracts import modes
from genenv.contracts.modes import ModePolicy

router = APIRouter(prefix="/v1/modes", tags=["modes"])


@router.get("", summary="List the run modes")
def list_modes() -> list[ModePolicy]:
    """Every run mode in report order: how its tasks are made, whether and how its simulator trains, what its
    agent trains on, who makes its attempts, and its report label and colour."""
    return list(modes.MODES.values())


def stylesheet() -> str:
    """The dashboard's mode colours as CSS (served at /dashboard/modes.css): class m-other, the colour of a mode
    the table does not know, then one class m-<mode> per mode, later rules winning (an element has both)."""
    rules = [f".m-other {{ stroke: {modes.FALLBACK_COLOUR}; fill: {modes.FALLBACK_COLOUR}; }}"]
    rules += [f".m-{m.name} {{ stroke: {m.colour}; fill: {m.colour}; }}" for m in modes.MODES.values()]
    header = "/* Generated from the run-mode table (genenv.contracts.modes; GET /v1/modes). */"
    return "\n".join([header, *rules]) + "\n"
