"""Experiments through the control plane (in-process ASGI) on real SQLite and real Postgres: create with members,
list/show, start (sequential and concurrent), cancel cascading to the runs, the member chain, the series, and the
404/409/422 answers in the one error envelope."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fnd_helpers import Api, run_status

from genenv.contracts.epochs import EpochPhase, EpochSummary
from genenv.contracts.runs import RunStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.models import CurriculumScoreRow, EpochRow, EvaluationRow, RunRow, TaskRow, TaskStatRow
from genenv.db.repositories import experiments
from genenv.settings import GenEnvSettings

TEMPLATE = {"name": "t", "epochs": 2, "seeds_per_epoch": 2, "eval_every": 1, "eval_benchmarks": ["arithmetic"]}


def _error(resp: httpx.Response, status: int) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


async def _create(api: Api, **fields: Any) -> dict[str, Any]:
    body = {"name": "exp", "template": TEMPLATE, "modes": ["genenv", "random_simulator"], "replicates": 2, **fields}
    resp = await api.client.post("/v1/experiments", json=body)
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


def _sessions(db_url: str) -> Any:
    return make_session_factory(make_engine(GenEnvSettings(database={"url": db_url}).database))


async def test_create_makes_one_run_per_mode_and_replicate(api: Api) -> None:
    exp = await _create(api, random_seeds=[7, 11])
    assert exp["status"] == "created" and exp["replicates"] == 2 and exp["concurrent"] is False
    members = exp["members"]
    # Replicate by replicate, modes in the given order; replicate r of every mode shares its seed.
    assert [(m["mode"], m["replicate"], m["random_seed"]) for m in members] == [
        ("genenv", 0, 7), ("random_simulator", 0, 7), ("genenv", 1, 11), ("random_simulator", 1, 11)
    ]
    assert {m["status"] for m in members} == {"created"}
    for m in members:  # each member is an ordinary run with the template's settings
        run = (await api.client.get(f"/v1/runs/{m['run_id']}")).json()
        assert run["config"]["mode"] == m["mode"] and run["config"]["random_seed"] == m["random_seed"]
        assert run["config"]["seeds_per_epoch"] == 2 and run["config"]["eval_benchmarks"] == ["arithmetic"]
        assert run["name"] == f"exp/{m['mode']}/r{m['replicate']}"
    assert (await api.client.get(f"/v1/experiments/{exp['id']}")).json() == exp
    default_seeds = await _create(api, template={**TEMPLATE, "random_seed": 5}, replicates=3)
    assert [m["random_seed"] for m in default_seeds["members"]][::2] == [5, 6, 7]


async def test_list_pages_newest_first(api: Api) -> None:
    ids = [(await _create(api, name=f"page-{i}", replicates=1))["id"] for i in range(3)]
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = (await api.client.get("/v1/experiments", params=params)).json()
        assert len(page["items"]) <= 2
        seen += [e["id"] for e in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen))
    positions = [seen.index(i) for i in ids]
    assert positions == sorted(positions, reverse=True)  # newest first
    bad = _error(await api.client.get("/v1/experiments", params={"cursor": "garbage"}), 400)
    assert bad["param"] == "cursor"


@pytest.mark.parametrize(
    ("fields", "param", "needle"),
    [
        ({"modes": ["genenv", "genenv"]}, None, "must not repeat"),
        ({"random_seeds": [1]}, None, "random_seeds has 1 entries for 2 replicates"),
        ({"modes": ["bogus"]}, "modes.0", "genenv"),
        ({"replicates": 0}, "replicates", "greater than or equal to 1"),
        ({"template": {"alpah": 1}}, "template.alpah", "Extra inputs"),
        ({"colour": "red"}, "colour", "Extra inputs"),
    ],
)
async def test_bad_bodies_are_422(api: Api, fields: dict[str, Any], param: str | None, needle: str) -> None:
    body = {"template": TEMPLATE, "modes": ["genenv", "random_simulator"], "replicates": 2, **fields}
    err = _error(await api.client.post("/v1/experiments", json=body), 422)
    assert err["type"] == "invalid_request_error" and needle in err["message"], err
    assert err["param"] == param, err


async def test_nul_characters_are_refused_before_any_insert(api: Api) -> None:
    # Postgres text and JSONB cannot store U+0000: a 400 in the envelope (as for runs), never a failed INSERT.
    before = (await api.client.get("/v1/runs", params={"limit": 500})).json()["items"]
    body = {"name": "a\x00b", "template": TEMPLATE, "modes": ["genenv"], "replicates": 1}
    err = _error(await api.client.post("/v1/experiments", json=body), 400)
    assert "NUL" in err["message"] and err["param"] == "body"
    assert (await api.client.get("/v1/runs", params={"limit": 500})).json()["items"] == before


async def test_unknown_experiment_is_404(api: Api) -> None:
    for method, path in (("GET", ""), ("GET", "/series"), ("POST", "/start"), ("POST", "/cancel")):
        err = _error(await api.client.request(method, f"/v1/experiments/nope{path}"), 404)
        assert err["code"] == "experiment_not_found" and err["param"] == "experiment_id"


async def test_sequential_start_runs_one_member_and_cancel_cascades(api: Api, db_url: str) -> None:
    exp = await _create(api)
    started = (await api.client.post(f"/v1/experiments/{exp['id']}/start")).json()
    assert started["status"] == "running"
    statuses = [m["status"] for m in started["members"]]
    assert statuses == ["running", "created", "created", "created"]
    first = started["members"][0]["run_id"]
    # The message went out after the commit: a separate connection already saw the run running.
    assert api.enqueuer.calls == [(first, "running")]
    err = _error(await api.client.post(f"/v1/experiments/{exp['id']}/start"), 409)
    assert err["code"] == "illegal_transition" and "created" in err["message"]

    # Cancelling the running member by hand starts the next one (a sequential experiment never stalls).
    assert (await api.client.post(f"/v1/runs/{first}/cancel")).status_code == 200
    second = started["members"][1]["run_id"]
    assert run_status(db_url, second) is RunStatus.RUNNING
    assert api.enqueuer.calls[-1] == (second, "running")

    cancelled = (await api.client.post(f"/v1/experiments/{exp['id']}/cancel")).json()
    assert cancelled["status"] == "cancelled"
    assert {m["status"] for m in cancelled["members"]} == {"cancelled"}
    for m in cancelled["members"]:
        assert run_status(db_url, m["run_id"]) is RunStatus.CANCELLED
    err = _error(await api.client.post(f"/v1/experiments/{exp['id']}/cancel"), 409)
    assert err["code"] == "illegal_transition"
    _error(await api.client.post(f"/v1/experiments/{exp['id']}/start"), 409)


async def test_concurrent_start_runs_every_member(api: Api) -> None:
    exp = await _create(api, concurrent=True)
    started = (await api.client.post(f"/v1/experiments/{exp['id']}/start")).json()
    assert {m["status"] for m in started["members"]} == {"running"}
    assert sorted(api.enqueuer.calls) == sorted((m["run_id"], "running") for m in started["members"])


async def test_chain_and_derived_status(api: Api, db_url: str) -> None:
    exp = await _create(api, replicates=1)
    await api.client.post(f"/v1/experiments/{exp['id']}/start")
    first, second = (m["run_id"] for m in exp["members"])
    factory = _sessions(db_url)
    with session_scope(factory) as s:
        s.get(RunRow, first).status = RunStatus.COMPLETED.value  # type: ignore[union-attr]
    with session_scope(factory) as s:
        assert experiments.start_next_member(s, first) == second
    with session_scope(factory) as s:  # idempotent: the next member is live now
        assert experiments.start_next_member(s, first) is None
    assert (await api.client.get(f"/v1/experiments/{exp['id']}")).json()["status"] == "running"
    with session_scope(factory) as s:
        s.get(RunRow, second).status = RunStatus.FAILED.value  # type: ignore[union-attr]
    shown = (await api.client.get(f"/v1/experiments/{exp['id']}")).json()
    assert shown["status"] == "failed"
    _error(await api.client.post(f"/v1/experiments/{exp['id']}/cancel"), 409)
    with session_scope(factory) as s:
        s.get(RunRow, second).status = RunStatus.COMPLETED.value  # type: ignore[union-attr]
    assert (await api.client.get(f"/v1/experiments/{exp['id']}")).json()["status"] == "completed"


async def test_series_reads_summaries_evaluations_and_task_difficulty(api: Api, db_url: str) -> None:
    exp = await _create(api, replicates=1)
    run_id = exp["members"][0]["run_id"]
    with session_scope(_sessions(db_url)) as s:
        for epoch, p_hat in ((0, 0.2), (1, 0.45)):
            summary = EpochSummary(p_hat=p_hat, in_band_share=epoch / 2, generated_tasks_so_far=8 * (epoch + 1),
                                   mean_response_tokens=10.0 + epoch)
            s.add(EpochRow(run_id=run_id, index=epoch, phase=EpochPhase.CLOSED.value,
                           summary=summary.model_dump(mode="json")))
            s.add(EvaluationRow(run_id=run_id, epoch=epoch, benchmark="arithmetic", split="eval", n_items=4,
                                metrics={"overall": {"accuracy": 0.25 * (epoch + 1)},
                                         "categories": {"1d-add": {"accuracy": 0.5}, "2d-add": {"accuracy": None}}}))
            for variation, expression in enumerate(("1 + 2", "12 * 3") if epoch else ("1 + 2", "3 + 4")):
                task = TaskRow(run_id=run_id, epoch=epoch, seed_id="s", domain="arithmetic", variation=variation,
                               status="valid", payload={"expression": expression})
                s.add(task)
                s.flush()  # task_stat: epoch 1's "1 + 2" (a repeat of epoch 0's) 5/8, its "12 * 3" 1/8
                k = (5 if variation == 0 else 1) if epoch else 2
                s.add(TaskStatRow(task_id=task.id, n=8, k=k, p_hat=k / 8, p_beta=(k + 1) / 10))
            s.add(CurriculumScoreRow(run_id=run_id, epoch=epoch, seed_id="s", k=6 if epoch else 4, n=16,
                                     p_hat=(6 if epoch else 4) / 16, in_band=False))
            s.add(TaskRow(run_id=run_id, epoch=epoch, seed_id="s", domain="arithmetic", variation=9,
                          status="rejected", payload=None, rejection_reason="not_json"))
        # An epoch still open is not part of the series.
        s.add(EpochRow(run_id=run_id, index=2, phase=EpochPhase.ROLLOUT.value))
    series = (await api.client.get(f"/v1/experiments/{exp['id']}/series")).json()
    assert series["domain"] == "arithmetic" and series["heldout_benchmark"] == "arithmetic"
    assert series["alpha"] == 0.5 and series["k_min"] == 0.1
    assert set(series["difficulty_measures"]) == {"operand_digits", "operators", "has_mul"}
    member = next(m for m in series["members"] if m["run_id"] == run_id)
    assert [e["epoch"] for e in member["epochs"]] == [0, 1]
    e0, e1 = member["epochs"]
    assert (e0["p_hat"], e1["p_hat"]) == (0.2, 0.45) and e1["in_band_share"] == 0.5
    assert (e0["heldout_accuracy"], e1["heldout_accuracy"]) == (0.25, 0.5)
    assert e0["heldout_by_category"] == {"1d-add": 0.5}
    assert e1["generated_tasks_so_far"] == 16 and e1["mean_response_tokens"] == 11.0
    assert e0["difficulty"] == {"operand_digits": 1.0, "operators": 1.0, "has_mul": 0.0}
    assert e1["difficulty"] == {"operand_digits": 1.5, "operators": 1.0, "has_mul": 0.5}
    # Repeats: epoch 1's "1 + 2" repeats epoch 0's; the batch's fresh counts are the other task's own (task_stat).
    assert (e0["valid_tasks"], e0["repeated_tasks"], e1["valid_tasks"], e1["repeated_tasks"]) == (2, 0, 2, 1)
    b1 = next(b for b in member["seed_batches"] if b["epoch"] == 1)
    assert (b1["k"], b1["n"], b1["repeated_tasks"], b1["fresh_k"], b1["fresh_n"]) == (6, 16, 1, 1, 8)
    other = next(m for m in series["members"] if m["run_id"] != run_id)
    assert other["epochs"] == []
