"""The training-dynamics dashboard: a static page whose script draws the epoch curves from the JSON API.

Auth design: the page, its script and its stylesheet hold no data, so they are public (exact paths in
``DASHBOARD_PATHS``). Everything the page shows comes from the ``/v1`` API, which keeps requiring the bearer
token: the user pastes the token into the page once and the browser keeps it in ``localStorage`` (this origin
only), or opens ``/dashboard#token=...``; the token is taken from the URL fragment and removed from the address
bar. A fragment is never sent to the server, so unlike ``?token=`` it cannot end up in access logs, proxies or
Referer headers. A strict Content-Security-Policy (scripts and styles from this origin only, no inline code)
limits what an injected string could do with the stored token; the script only ever sets ``textContent``.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import PurePath

from fastapi import APIRouter, Response

from genenv.contracts.errors import NotFoundError
from genenv_control_plane.routes import modes

router = APIRouter(tags=["dashboard"], include_in_schema=False)

_MEDIA_TYPES = {
    # Module scripts (<script type="module"> and their imports) are refused unless served with a JavaScript type.
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
_ASSETS = {
    f.name: _MEDIA_TYPES[suffix]
    for f in resources.files("genenv_control_plane").joinpath("static").iterdir()
    if (suffix := PurePath(f.name).suffix) in _MEDIA_TYPES
}
"""Every script module and stylesheet of static/, by file name (a new module is served without a route change)."""
MODES_CSS = "modes.css"
"""The mode colours, generated from the run-mode table (genenv_control_plane.routes.modes.stylesheet)."""
DASHBOARD_PATHS = frozenset({"/dashboard", f"/dashboard/{MODES_CSS}", *(f"/dashboard/{name}" for name in _ASSETS)})
"""Served without a token: the static shell only."""

_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Revalidate every load so an upgraded package's page is never mixed with a cached old script.
    "Cache-Control": "no-cache",
}


@cache
def _static(name: str) -> bytes:
    """A file of the package's static/ folder (read once; shipped in the wheel)."""
    return resources.files("genenv_control_plane").joinpath("static", name).read_bytes()


@router.get("/dashboard")
def dashboard() -> Response:
    """The dashboard page."""
    return Response(_static("dashboard.html"), media_type="text/html; charset=utf-8", headers=_HEADERS)


@router.get("/dashboard/{name}")
def dashboard_asset(name: str) -> Response:
    """One of the page's script modules or its stylesheets."""
    if name == MODES_CSS:
        return Response(modes.stylesheet(), media_type=_MEDIA_TYPES[".css"], headers=_HEADERS)
    media_type = _ASSETS.get(name)
    if media_type is None:
        raise NotFoundError(f"no dashboard asset {name!r}", param="name", code="asset_not_found")
    return Response(_static(name), media_type=media_type, headers=_HEADERS)
