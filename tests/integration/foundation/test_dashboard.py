"""GET /dashboard: the static shell is public, the data behind it stays behind the bearer token."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from fnd_helpers import Api

from genenv.contracts.modes import MODES
from genenv.rejections import REJECTION_HINTS, UNKNOWN_HINT


async def _anonymous(api: Api, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=api.transport, base_url="http://cp") as client:
        return await client.get(path)


IMPORT = re.compile(r'^import .* from "\./([\w.-]+\.js)";$', re.MULTILINE)


async def _script_modules(api: Api) -> dict[str, str]:
    """The page's script modules by file name, from dashboard.js along its static imports, each fetched without a
    token as the browser does: a module served without a JavaScript MIME type would not run."""
    modules: dict[str, str] = {}
    todo = ["dashboard.js"]
    while todo:
        name = todo.pop()
        if name in modules:
            continue
        resp = await _anonymous(api, f"/dashboard/{name}")
        assert resp.status_code == 200, name
        assert resp.headers["content-type"] == "text/javascript; charset=utf-8", name
        assert resp.headers["x-content-type-options"] == "nosniff"
        modules[name] = resp.text
        todo += IMPORT.findall(resp.text)
    return modules


async def test_dashboard_page_and_assets_are_served_without_a_token(api: Api) -> None:
    page = await _anonymous(api, "/dashboard")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert '<script type="module" src="dashboard/dashboard.js"></script>' in page.text
    assert 'id="charts"' in page.text and 'id="token-input"' in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-content-type-options"] == "nosniff"

    modules = await _script_modules(api)
    assert {"dashboard.js", "api.js", "state.js", "charts.js", "view-run.js", "view-experiment.js",
            "view-tasks.js"} <= set(modules)
    script = "\n".join(modules.values())
    # One fetch for the whole API (api.js), and no module ever parses data as HTML.
    assert script.count("fetch(") == 1 and 'fetch(path, { headers, cache: "no-store" })' in modules["api.js"]
    assert ".innerHTML" not in script and "insertAdjacentHTML" not in script
    style = await _anonymous(api, "/dashboard/dashboard.css")
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")


async def test_dashboard_run_page_says_what_the_run_waits_on(api: Api) -> None:
    page = (await _anonymous(api, "/dashboard")).text
    assert '<p id="run-waiting" class="waiting" hidden></p>' in page
    view = (await _script_modules(api))["view-run.js"]
    # The same words as `genenv runs watch` (genenv.cli.render.waiting_line), shown only while waiting_on is set.
    assert ("`waiting on ${w.dependency} since ${since} UTC (${tries}; ${w.phase} of epoch ${w.epoch}): "
            "${w.last_error}`") in view
    assert "waiting.hidden = !run.waiting_on;" in view
    assert ".waiting {" in (await _anonymous(api, "/dashboard/dashboard.css")).text


async def test_dashboard_does_not_open_the_api_or_other_paths(api: Api) -> None:
    assert (await _anonymous(api, "/v1/runs")).status_code == 401
    assert (await _anonymous(api, "/dashboard/other.js")).status_code == 401
    missing = await api.client.get("/dashboard/other.js")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "asset_not_found"
    paths = (await api.client.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith("/dashboard")]


async def test_dashboard_experiment_view_uses_the_report_mode_colours(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = (await _anonymous(api, "/dashboard")).text
    assert 'id="experiment-list"' in page and 'id="experiment-charts"' in page and 'id="member-table"' in page
    assert 'href="dashboard/modes.css"' in page
    script = "\n".join((await _script_modules(api)).values())
    assert '"v1/experiments?limit=100"' in script and 'params.get("experiment")' in script
    assert "generic_rwr" not in script  # no copy of the mode table in the scripts
    listed = (await api.client.get("/v1/modes")).json()
    colours = {m["name"]: m["colour"] for m in listed}
    assert colours == {"genenv": "#1f77b4", "random_simulator": "#ff7f0e", "static_augmentation": "#2ca02c",
                       "agent_only": "#7f7f7f", "generic_rwr": "#9467bd", "external_agent": "#d62728",
                       "external_random_simulator": "#8c564b", "external_generic_rwr": "#e377c2"}
    # A mode added to the table is coloured by the generated stylesheet, after the fallback it overrides.
    extra = MODES["genenv"].model_copy(update={"name": "test_mode", "colour": "#123456"})
    monkeypatch.setitem(MODES, "test_mode", extra)
    style = (await _anonymous(api, "/dashboard/modes.css")).text
    assert style.index(".m-other {") < style.index(".m-genenv {")
    for mode, colour in {**colours, "test_mode": "#123456"}.items():
        rule = re.search(rf"\.m-{mode} {{ stroke: (#[0-9a-f]{{6}}); fill: (#[0-9a-f]{{6}}); }}", style)
        assert rule is not None and rule.groups() == (colour, colour), mode


async def test_dashboard_epoch_view_shows_rejections_with_the_python_hints(api: Api, tmp_path: Path) -> None:
    """The epoch table's "rejected" column and the hints under it: rejections.js is served, imported by the run view,
    and its table, run by node, is genenv.rejections.REJECTION_HINTS."""
    modules = await _script_modules(api)
    assert "rejections.js" in modules
    assert 'from "./rejections.js"' in modules["view-run.js"] and '"rejected"' in modules["view-run.js"]
    assert 'from "./rejections.js"' in modules["view-tasks.js"]
    assert 'id="rejection-hints"' in (await _anonymous(api, "/dashboard")).text
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not installed")
    (tmp_path / "rejections.mjs").write_text(modules["rejections.js"])
    probe = (
        'import { REJECTION_HINTS, UNKNOWN_HINT, rejectionCounts, rejectionHint } from "./rejections.mjs";\n'
        "console.log(JSON.stringify({ hints: REJECTION_HINTS, unknown: UNKNOWN_HINT, made_up: rejectionHint('x'),\n"
        "  counts: rejectionCounts({ rejections: { invalid_task: 6, too_long: 10, empty: 6 } }),\n"
        "  none: rejectionCounts({}) }));\n"
    )
    (tmp_path / "probe.mjs").write_text(probe)
    answer = json.loads(subprocess.run([node, "probe.mjs"], cwd=tmp_path, capture_output=True, text=True,
                                       check=True, timeout=30).stdout)
    assert answer["hints"] == REJECTION_HINTS and answer["unknown"] == answer["made_up"] == UNKNOWN_HINT
    assert answer["counts"] == [["too_long", 10], ["empty", 6], ["invalid_task", 6]] and answer["none"] == []
