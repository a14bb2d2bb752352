"""Every request the user docs show exists in the services' OpenAPI schemas, and the documented answers are real."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest
from docs_helpers import (
    DOCS,
    EXTERNAL_VARS,
    SERVICE_VARS,
    TOKEN,
    Apps,
    code_blocks,
    curl_calls,
    endpoint_mentions,
    find_operation,
    json_blocks,
    section,
    template_regex,
)
from fastapi import FastAPI
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.routing import Route

import genenv.contracts.adapters
import genenv.contracts.experiments
import genenv.contracts.leases
import genenv.contracts.rollouts
import genenv.contracts.runs
import genenv.contracts.scores
import genenv.contracts.tasks
from genenv.contracts.adapters import Adapter
from genenv.contracts.epochs import Epoch
from genenv.contracts.errors import ErrorEnvelope
from genenv.contracts.leases import AttemptsRecorded, Lease
from genenv.contracts.pagination import Page
from genenv.contracts.rollouts import VerifyResponse
from genenv.contracts.runs import Run, RunConfig, WaitingOn
from genenv.contracts.scores import RunStat, ScoreResponse
from genenv.contracts.tasks import GeneratedTask, GenerateResponse, Task
from genenv.http import PUBLIC_PATHS

DOCUMENTS = ("api.md", "live-task-generator.md")
# Served by every app but left out of the OpenAPI schemas on purpose.
HIDDEN_PATHS = frozenset({"/metrics", "/openapi.json"})
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MISSING_RUN = "0123456789abcdef0123456789abcdef"


def _text(doc: str) -> str:
    return (DOCS / doc).read_text()


def _request_models() -> dict[str, type[BaseModel]]:
    """Contract classes by name: what an OpenAPI requestBody $ref points at."""
    models: dict[str, type[BaseModel]] = {}
    for module in (
        genenv.contracts.adapters,
        genenv.contracts.experiments,
        genenv.contracts.leases,
        genenv.contracts.runs,
        genenv.contracts.rollouts,
        genenv.contracts.scores,
        genenv.contracts.tasks,
    ):
        for name, obj in vars(module).items():
            if isinstance(obj, type) and issubclass(obj, BaseModel):
                models[name] = obj
    return models


def _hidden_route(app: FastAPI, method: str, path: str) -> bool:
    if path == app.openapi_url:
        return method == "GET"
    return any(
        isinstance(r, Route) and r.path == path and not r.include_in_schema and method in (r.methods or ())
        for r in app.routes
    )


def _query_params(op: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in op.get("parameters", []) if p["in"] == "query"}


def _allowed_values(schema: dict[str, Any], openapi: dict[str, Any]) -> list[str] | None:
    """The enum of a parameter schema ($ref and Optional unwrapped), or None when it is not an enum."""
    for candidate in [schema, *schema.get("anyOf", [])]:
        if "$ref" in candidate:
            candidate = openapi["components"]["schemas"][candidate["$ref"].rsplit("/", 1)[1]]
        if "enum" in candidate:
            return [str(v) for v in candidate["enum"]]
    return None


def curl_problems(text: str, apps: Apps) -> list[str]:
    """What is wrong with the curl examples of a document: unknown routes, methods, parameters, bodies, auth."""
    problems: list[str] = []
    models = _request_models()
    for call in curl_calls(text):
        if call.var in EXTERNAL_VARS:
            continue
        if call.var not in SERVICE_VARS:
            problems.append(f"{call}: unknown base URL variable")
            continue
        service = SERVICE_VARS[call.var]
        if call.path in HIDDEN_PATHS:
            if not _hidden_route(apps.apps[service], call.method, call.path):
                problems.append(f"{call}: not served by the {service}")
            continue
        openapi = apps.openapi(service)
        op = find_operation(openapi, call.method, call.path)
        if op is None:
            problems.append(f"{call}: not a route of the {service}")
            continue
        if call.path not in PUBLIC_PATHS and "$AUTH" not in call.headers:
            problems.append(f"{call}: sent without the bearer token")
        params = _query_params(op)
        for name, value in call.query.items():
            if name not in params:
                problems.append(f"{call}: query parameter {name!r} is not one of {sorted(params)}")
                continue
            allowed = _allowed_values(params[name]["schema"], openapi)
            if allowed is not None and not value.startswith("$") and value not in allowed:
                problems.append(f"{call}: {name}={value} is not one of {allowed}")
        if call.body is not None and not call.body.startswith("@"):
            if "Content-Type: application/json" not in call.headers:
                problems.append(f"{call}: JSON body without its Content-Type")
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            name = schema["$ref"].rsplit("/", 1)[1] if "$ref" in schema else schema["title"]  # inlined schemas
            try:
                models[name].model_validate_json(call.body)
            except ValidationError as exc:
                problems.append(f"{call}: the body is not a valid {name}: {exc}")
    return problems


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_every_curl_targets_a_real_route(doc: str, apps: Apps) -> None:
    text = _text(doc)
    assert curl_calls(text), f"no curl example in {doc}"
    assert curl_problems(text, apps) == []


BROKEN = """
```sh
curl -sS -X DELETE "$GENENV_URL/v1/runs/$RUN/epochs" -H "$AUTH"
curl -sS "$GENENV_URL/v1/run/$RUN/epochs" -H "$AUTH"
curl -sS "$GENENV_URL/v1/runs/$RUN/tasks?state=valid" -H "$AUTH"
curl -sS "$GENENV_URL/v1/runs/$RUN/stats?kind=seeds" -H "$AUTH"
curl -sS "$GENENV_URL/v1/runs"
curl -sS -X POST "$GENENV_SIM_URL/v1/tasks:generate" -H "$AUTH" -H "Content-Type: application/json" \
  -d '{"domain": "arithmetic", "variations": 4}'
curl -sS -X POST "$GENENV_VERIFIER_URL/v1/tasks:generate" -H "$AUTH"
curl -sS "$SOMEWHERE/v1/runs"
```
"""


def test_the_curl_check_catches_broken_examples(apps: Apps) -> None:
    problems = curl_problems(BROKEN, apps)
    expected = [
        "DELETE $GENENV_URL/v1/runs/$RUN/epochs: not a route",
        "GET $GENENV_URL/v1/run/$RUN/epochs: not a route",
        "query parameter 'state'",
        "kind=seeds is not one of",
        "GET $GENENV_URL/v1/runs: sent without the bearer token",
        "not a valid GenerateRequest",
        "POST $GENENV_VERIFIER_URL/v1/tasks:generate: not a route of the verifier",
        "$SOMEWHERE/v1/runs: unknown base URL variable",
    ]
    assert len(problems) == len(expected), problems
    for fragment, problem in zip(expected, problems, strict=True):
        assert fragment in problem, (fragment, problem)


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_every_endpoint_named_in_the_text_exists(doc: str, apps: Apps) -> None:
    mentions = endpoint_mentions(_text(doc))
    assert mentions
    for method, path in mentions:
        sample = re.sub(r"<[^>]+>", "start", path)
        if path in HIDDEN_PATHS:
            assert all(_hidden_route(app, method, path) for app in apps.apps.values()), path
            continue
        found = [s for s in apps.apps if find_operation(apps.openapi(s), method, sample) is not None]
        assert found, f"{doc}: `{method} {path}` is not a route of any service"


def test_the_unauthenticated_paths_are_documented() -> None:
    text = _text("api.md")
    for path in PUBLIC_PATHS:
        assert f"`GET {path}`" in text
    assert {"/healthz", "/readyz", "/metrics"} == set(PUBLIC_PATHS)


def _documented_errors() -> dict[int, dict[str, Any]]:
    text = _text("api.md")
    found = re.findall(r"^\*\*(\d{3})\*\* — .*?\n\n```json\n(.*?)```", text, re.MULTILINE | re.DOTALL)
    return {int(status): json.loads(body) for status, body in found}


async def _reproduce(app: FastAPI) -> dict[int, httpx.Response]:
    """The requests the error examples describe, sent to the control plane."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://cp") as c:
        created = await c.post("/v1/runs", headers=AUTH, json={"config": {"name": "docs"}})
        run_id = created.json()["id"]
        return {
            401: await c.get("/v1/runs"),
            403: await c.get("/v1/runs", headers={"Authorization": "Bearer not-a-configured-token"}),
            404: await c.get(f"/v1/runs/{MISSING_RUN}", headers=AUTH),
            409: await c.post(f"/v1/runs/{run_id}/resume", headers=AUTH),
            413: await c.post(
                "/v1/runs", headers={**AUTH, "Content-Type": "application/json"}, content=b" " * (4 * 1024 * 1024 + 1)
            ),
            422: await c.post("/v1/runs", headers=AUTH, json={"config": {"curriculum": {"alpha": 1.5}}}),
            400: await c.get("/v1/runs", headers=AUTH, params={"cursor": "garbage"}),
        }


def test_documented_errors_are_what_the_control_plane_answers(apps: Apps) -> None:
    documented = _documented_errors()
    assert set(documented) == {400, 401, 403, 404, 409, 413, 422}
    actual = asyncio.run(_reproduce(apps.apps["control_plane"]))
    for status, body in documented.items():
        assert actual[status].status_code == status
        assert actual[status].json() == body, f"the {status} example differs from the real answer"
    assert actual[401].headers["WWW-Authenticate"] == "Bearer"


def test_documented_metrics_lines_exist(apps: Apps) -> None:
    async def go() -> str:
        transport = httpx.ASGITransport(app=apps.apps["control_plane"])
        async with httpx.AsyncClient(transport=transport, base_url="http://cp") as c:
            run = (await c.post("/v1/runs", headers=AUTH, json={"config": {}})).json()["id"]
            await c.post(f"/v1/runs/{run}/start", headers=AUTH)
            await c.post(f"/v1/runs/{run}/resume", headers=AUTH)
            return (await c.get("/metrics")).text

    exposition = asyncio.run(go())
    text_blocks = [b for b in code_blocks(_text("api.md"), "text") if "genenv_http" in b]
    assert text_blocks
    for line in text_blocks[0].splitlines():
        series = line.rsplit(" ", 1)[0]
        assert series in exposition, f"{series} is not exported"
    for family in re.findall(r"`(genenv_[a-z_]+)", _text("api.md")):
        assert f"# TYPE {family.removesuffix('_total')}" in exposition or f"# TYPE {family}" in exposition, family


def _model_for(example: dict[str, Any]) -> Any:
    """The wire model a JSON example shows, judged by its keys (an unknown shape is a test failure)."""
    if "config" in example:
        return Run
    if "error" in example:
        return ErrorEnvelope
    if "lease_id" in example:
        return Lease
    if "recorded" in example:
        return AttemptsRecorded
    if "verdicts" in example:
        return VerifyResponse
    if "scores" in example:
        return ScoreResponse
    if "accepted" in example:
        return GenerateResponse
    if "items" in example:
        first = example["items"][0]
        if "phase" in first:
            return Page[Epoch]
        if "role" in first:
            return Page[Adapter]
        if "kind" in first:
            return Page[RunStat]
        return Page[Task]
    if "rejection_reason" in example:
        return GeneratedTask
    if "dependency" in example:
        return WaitingOn
    raise AssertionError(f"no model for the JSON example with keys {sorted(example)}")


def _placeholders(value: Any) -> bool:
    if isinstance(value, dict):
        return "..." in value or any(_placeholders(v) for v in value.values())
    if isinstance(value, list):
        return any(_placeholders(v) for v in value)
    return isinstance(value, str) and value == "..."


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_json_examples_are_valid_wire_objects(doc: str) -> None:
    examples = json_blocks(_text(doc))
    assert examples
    for example in examples:
        assert not _placeholders(example), f"{doc}: a JSON example has a '...' placeholder: shorten by omission"
        model = _model_for(example)
        TypeAdapter(model).validate_python(example)
        if model is Run:
            RunConfig.model_validate(example["config"])  # the full config, not an abbreviation


def test_openapi_paths_the_docs_rely_on_are_templated_as_expected(apps: Apps) -> None:
    paths = apps.openapi("simulator")["paths"]
    assert "/v1/tasks:generate" in paths
    assert template_regex("/v1/runs/{run_id}/start").match("/v1/runs/abc/start")
    assert not template_regex("/v1/runs/{run_id}/start").match("/v1/runs/abc/def/start")


def test_create_example_answers_with_the_sent_config_and_its_defaults() -> None:
    text = _text("api.md")
    create = next(c for c in curl_calls(text) if c.path == "/v1/runs" and c.body and not c.body.startswith("@"))
    assert create.body is not None
    run = next(e for e in json_blocks(text) if "config" in e and "status" in e)
    assert run["config"] == RunConfig.model_validate(json.loads(create.body)["config"]).model_dump(mode="json")


def _answer_after(text: str, marker: str) -> Any:
    """The first ```json block after ``marker`` (the documented answer of the request shown there)."""
    start = text.index("```json\n", text.index(marker)) + len("```json\n")
    return json.loads(text[start : text.index("```", start)])


@pytest.mark.parametrize(
    ("service", "path"), [("verifier", "/v1/verify"), ("curriculum", "/v1/score")], ids=["verify", "score"]
)
def test_documented_pure_answers_are_what_the_service_computes(apps: Apps, service: str, path: str) -> None:
    text = _text("api.md")
    call = next(c for c in curl_calls(text) if c.path == path)
    assert call.body is not None

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=apps.apps[service])
        async with httpx.AsyncClient(transport=transport, base_url="http://svc") as c:
            return await c.post(path, headers={**AUTH, "Content-Type": "application/json"}, content=call.body)

    response = asyncio.run(send())
    assert response.status_code == 200, response.text
    assert response.json() == _answer_after(text, f"{call.var}{path}")


def test_epoch_and_task_examples_show_every_field() -> None:
    """api.md's epoch summaries and task list name every field of their contracts (a field added to a contract
    and left out of the examples is a reader's surprise), and the prose names every summary field an example
    alone does not explain."""
    from genenv.contracts.epochs import EpochSummary

    examples = [e for e in json_blocks(_text("api.md")) if isinstance(e, dict) and "items" in e]
    epochs = [item for e in examples for item in e["items"] if "phase" in item]
    assert epochs
    for epoch in epochs:
        assert set(epoch["summary"]) == set(EpochSummary.model_fields), epoch["index"]
    tasks = [item for e in examples if _model_for(e) == Page[Task] for item in e["items"]]
    assert tasks and all(set(t) == set(Task.model_fields) for t in tasks)
    prose = section(_text("api.md"), "Runs: create → start → watch → pause, resume, cancel")
    for field in ("rejections", "malformed_responses", "groups_with_variance_share", "prompts_with_stats_share",
                  "generated_tasks_so_far", "rollouts_so_far", "simulator_kl_capped"):
        assert f"`{field}`" in prose, field


def test_unknown_domain_is_the_documented_404_on_every_service(apps: Apps) -> None:
    """`unknown_domain` is listed under one status in the error table, and the control plane (a run config naming
    no domain) and the simulator (a generate request naming none) both answer it."""
    rows = [line for line in section(_text("api.md"), "Errors").splitlines()
            if line.startswith("| 4") and "`unknown_domain`" in line]
    assert len(rows) == 1 and rows[0].startswith("| 404 | `not_found_error` |")

    async def ask() -> list[httpx.Response]:
        answers = []
        for service, path, body in (("control_plane", "/v1/runs", {"config": {"domain": "chess"}}),
                                    ("simulator", "/v1/tasks:generate", {"domain": "chess"})):
            transport = httpx.ASGITransport(app=apps.apps[service])
            async with httpx.AsyncClient(transport=transport, base_url="http://svc") as c:
                answers.append(await c.post(path, headers=AUTH, json=body))
        return answers

    for answer in asyncio.run(ask()):
        assert answer.status_code == 404, answer.text
        error = answer.json()["error"]
        assert (error["type"], error["code"]) == ("not_found_error", "unknown_domain")
