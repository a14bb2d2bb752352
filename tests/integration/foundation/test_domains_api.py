"""REST registration of data-defined domains (SQLite and Postgres): 201, 422 with line errors, 413 over the limit,
409 for a taken name, 404 for an unknown domain in a run config; listed with the built-ins; usable in a run."""

from __future__ import annotations

import json
from typing import Any

import httpx
from fnd_helpers import AUTH, Api, RecordingEnqueuer, app_settings

from genenv_control_plane.app import create_app

TOOL = {"type": "function", "function": {
    "name": "book_room", "description": "Book a meeting room",
    "parameters": {"type": "object", "properties": {
        "room": {"type": "string", "enum": ["orion", "vega"]},
        "hours": {"type": "integer", "minimum": 1, "maximum": 8}}, "required": ["room", "hours"]}}}


def _row(text: str, calls: list[dict[str, Any]], **extra: Any) -> str:
    return json.dumps({"tools": [TOOL], "messages": [{"role": "user", "content": text}], "calls": calls, **extra})


GOOD = "\n".join([
    _row("Book orion for 2 hours", [{"name": "book_room", "arguments": {"room": "orion", "hours": 2}}]),
    _row("Book vega for 3 hours", [{"name": "book_room", "arguments": {"room": "vega", "hours": 3}}]),
    _row("What time is it?", [], split="eval"),
]) + "\n"


def _error(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"}
    return dict(body["error"])


async def test_register_list_and_use_a_data_domain(api: Api) -> None:
    resp = await api.client.post("/v1/domains", json={"name": "rooms", "kind": "function_calling", "content": GOOD})
    assert resp.status_code == 201, resp.text
    info = resp.json()
    assert (info["name"], info["source"], info["kind"], info["train_rows"], info["eval_rows"]) == (
        "rooms", "data", "function_calling", 2, 1)
    again = await api.client.post("/v1/domains", json={"name": "rooms", "kind": "function_calling", "content": GOOD})
    assert again.status_code == 201 and again.json()["sha256"] == info["sha256"]  # same file: idempotent
    other = GOOD.replace("2 hours", "4 hours").replace('"hours": 2', '"hours": 4')
    err = _error(await api.client.post("/v1/domains", json={"name": "rooms", "kind": "function_calling",
                                                             "content": other}), 409)
    assert err["code"] == "domain_exists"
    err = _error(await api.client.post("/v1/domains", json={"name": "arithmetic", "kind": "qa", "content": GOOD}),
                 409)
    assert "built-in" in err["message"]
    listed = (await api.client.get("/v1/domains")).json()["items"]
    assert [(d["name"], d["source"]) for d in listed] == [
        ("alfworld_step", "builtin"), ("api_bank", "builtin"), ("arithmetic", "builtin"),
        ("function_calling", "builtin"), ("qa", "builtin"), ("travel_plan", "builtin"), ("rooms", "data")]
    assert (await api.client.get("/v1/domains/rooms")).json()["train_rows"] == 2
    assert _error(await api.client.get("/v1/domains/nothere"), 404)["type"] == "not_found_error"
    run = await api.client.post("/v1/runs", json={"config": {"domain": "rooms"}})
    assert run.status_code == 201 and run.json()["config"]["domain"] == "rooms"


async def test_bad_seed_files_are_422_with_line_errors(api: Api) -> None:
    bad = "\n".join([
        _row("Book orion for 2 hours", [{"name": "book_room", "arguments": {"room": "orion", "hours": 2}}]),
        "{not json",
        _row("Book a desk", [{"name": "book_desk", "arguments": {}}]),
        _row("Book orion for 12 hours", [{"name": "book_room", "arguments": {"room": "orion", "hours": 12}}]),
        json.dumps({"tools": [TOOL], "calls": []}),
        _row("Book orion for 2 hours", [{"name": "book_room", "arguments": {"room": "orion", "hours": 2}}]),
    ])
    err = _error(await api.client.post("/v1/domains", json={"name": "broken", "kind": "function_calling",
                                                             "content": bad}), 422)
    assert err["code"] == "invalid_seed_file" and err["param"] == "content"
    message = err["message"]
    assert "6 rows: 1 train" in message or "6 rows: 0 train" in message
    for needle in ("line 2: bad JSON", "line 3: calls[0] names 'book_desk', which is not a declared tool",
                   "line 4: calls[0] (book_room): arguments violate the tool's schema at hours: 12 is greater than "
                   "the maximum of 8", "line 5: missing field 'messages'", "line 6: duplicate of line 1"):
        assert needle in message, message
    err = _error(await api.client.post("/v1/domains", json={"name": "empty", "kind": "qa", "content": ""}), 422)
    assert "file: empty file" in err["message"]
    err = _error(await api.client.post("/v1/domains", json={"name": "x", "kind": "qa", "content": GOOD}), 422)
    assert err["param"] == "name"  # too short for the name pattern
    err = _error(await api.client.post("/v1/domains", json={"name": "quiz", "kind": "exact_answer",
                                                             "content": GOOD, "options": {"normalize": "fuzzy"}}), 400)
    assert "normalize must be one of" in err["message"]
    assert (await api.client.get("/v1/domains")).json()["items"][-1]["name"] != "broken"  # nothing stored


async def test_unknown_domain_in_a_run_config_is_404(api: Api) -> None:
    err = _error(await api.client.post("/v1/runs", json={"config": {"domain": "nobody_registered"}}), 404)
    assert err["param"] == "config.domain" and err["code"] == "unknown_domain"
    assert "arithmetic" in err["message"]
    err = _error(await api.client.post("/v1/experiments", json={"name": "e", "template": {"domain": "nobody_x"},
                                                                 "modes": ["genenv"]}), 404)
    assert err["param"] == "template.domain"
    err = _error(await api.client.post("/v1/runs", json={"config": {"domain": "Not A Name"}}), 422)
    assert err["param"] == "config.domain"


async def test_domain_heldout_names_a_registered_domain(api: Api) -> None:
    assert (await api.client.post("/v1/domains", json={"name": "rooms", "kind": "function_calling",
                                                        "content": GOOD})).status_code == 201
    ok = await api.client.post("/v1/runs", json={"config": {"domain": "rooms", "eval_every": 1,
                                                            "eval_benchmarks": ["domain:rooms", "bfcl"]}})
    assert ok.status_code == 201, ok.text
    err = _error(await api.client.post("/v1/runs", json={"config": {
        "domain": "rooms", "eval_every": 1, "eval_benchmarks": ["domain:nobody_registered"]}}), 404)
    assert (err["param"], err["code"]) == ("config.eval_benchmarks", "unknown_domain")
    err = _error(await api.client.post("/v1/experiments", json={"name": "e", "modes": ["genenv"], "template": {
        "domain": "rooms", "eval_every": 1, "eval_benchmarks": ["domain:nobody_x"]}}), 404)
    assert err["param"] == "template.eval_benchmarks"
    err = _error(await api.client.post("/v1/runs", json={"config": {"eval_benchmarks": ["domain:Not A Name"]}}), 422)
    assert err["param"] == "config.eval_benchmarks"


async def test_seed_file_over_the_limit_is_413(db_url: str) -> None:
    settings = app_settings(db_url, domains={"max_seed_file_bytes": 2048}, max_body_bytes=1024 * 1024)
    app = create_app(settings, enqueuer=RecordingEnqueuer(db_url))
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://cp",
                                     headers=AUTH) as client:
            big = GOOD * 10
            assert len(big.encode()) > 2048
            err = _error(await client.post("/v1/domains", json={"name": "big", "kind": "function_calling",
                                                                 "content": big}), 413)
            assert err["code"] == "seed_file_too_large" and "over the size limit" in err["message"]
            huge = "x" * (2 * 1024 * 1024)  # past the body limit: the middleware's 413, same envelope
            err = _error(await client.post("/v1/domains", json={"name": "huge", "kind": "qa", "content": huge}), 413)
            assert err["type"] == "request_too_large_error"
    finally:
        app.state.control_plane.close()
