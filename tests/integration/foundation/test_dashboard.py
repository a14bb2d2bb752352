"""GET /dashboard: the static shell is public, the data behind it stays behind the bearer token."""

from __future__ import annotations

import httpx
from fnd_helpers import Api


async def _anonymous(api: Api, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=api.transport, base_url="http://cp") as client:
        return await client.get(path)


async def test_dashboard_page_and_assets_are_served_without_a_token(api: Api) -> None:
    page = await _anonymous(api, "/dashboard")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert '<script src="dashboard/dashboard.js" defer></script>' in page.text
    assert 'id="charts"' in page.text and 'id="token-input"' in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-content-type-options"] == "nosniff"

    script = await _anonymous(api, "/dashboard/dashboard.js")
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    assert 'fetch(path, { headers, cache: "no-store" })' in script.text and ".innerHTML" not in script.text
    style = await _anonymous(api, "/dashboard/dashboard.css")
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")


async def test_dashboard_does_not_open_the_api_or_other_paths(api: Api) -> None:
    assert (await _anonymous(api, "/v1/runs")).status_code == 401
    assert (await _anonymous(api, "/dashboard/other.js")).status_code == 401
    missing = await api.client.get("/dashboard/other.js")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "asset_not_found"
    paths = (await api.client.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith("/dashboard")]
