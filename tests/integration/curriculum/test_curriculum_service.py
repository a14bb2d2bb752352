"""POST /v1/score and the ledger endpoints through the typed client, in-process (ASGI) on real databases."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from curr_helpers import add_attempt, add_task, make_run
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from genenv.clients.base import ApiError
from genenv.clients.curriculum import CurriculumClient
from genenv.contracts.runs import CurriculumConfig
from genenv.contracts.scores import ScoreRequest, SuccessCounts
from genenv.curriculum import score_batches
from genenv.db.engine import session_scope
from genenv.db.models import CurriculumScoreRow
from genenv.db.repositories import ledger
from genenv.settings import GenEnvSettings
from genenv_curriculum.app import create_app

TOKEN = "curriculum-test-token"
S, F, X = "success", "fail", "invalid"


@pytest.fixture
async def client(any_sessions: sessionmaker[Session]) -> AsyncIterator[CurriculumClient]:
    settings = GenEnvSettings(auth={"tokens": [TOKEN]})
    app = create_app(settings, sessions=any_sessions)
    async with CurriculumClient("http://curriculum", token=TOKEN, transport=httpx.ASGITransport(app=app)) as c:
        yield c


def _seed(s: Session, run: str, seed: str, tasks: list[list[str]], *, epoch: int = 0, first: int = 0) -> list[int]:
    ids = []
    for v, outcomes in enumerate(tasks, start=first):
        t = add_task(s, run, epoch, seed, v)
        for a, o in enumerate(outcomes):
            add_attempt(s, t.id, a, o)
        ids.append(t.id)
    return ids


def _epoch(sessions: sessionmaker[Session], **config: Any) -> str:
    with session_scope(sessions) as s:
        run = make_run(s, curriculum={"beta": 20.0, "rwr_lambda": 3.0, **config})
        _seed(s, run, "seed-a", [[S, S, F, F], [S, F, F, S]])          # 4/8 = 0.5   in band
        _seed(s, run, "seed-b", [[S, F, F, F], [S, S, F, F]])          # 3/8 = 0.375 out of band
        _seed(s, run, "seed-c", [[S, S, F, F, X], [S, S, F, F, F]])    # 4/9 ≈ 0.444 in band (invalid not counted)
        _seed(s, run, "seed-d", [[X, X]])                              # no valid verdict: no p̂
        add_task(s, run, 0, "seed-d", 5, valid=False)
        add_task(s, run, 0, "seed-e", 0, valid=False)                  # only rejected tasks: not a batch
    return run


def _rows(sessions: sessionmaker[Session], run: str) -> list[tuple[str, int, int, bool, float | None]]:
    with session_scope(sessions) as s:
        rows = s.scalars(select(CurriculumScoreRow).where(CurriculumScoreRow.run_id == run)
                         .order_by(CurriculumScoreRow.seed_id)).all()
        return [(r.seed_id, r.k, r.n, r.in_band, r.weight) for r in rows]


async def test_score_a_stored_epoch_is_stored_idempotently(
    client: CurriculumClient, any_sessions: sessionmaker[Session]
) -> None:
    run = _epoch(any_sessions)
    res = await client.score(ScoreRequest(run_id=run, epoch=0))
    by = {x.seed_id: x for x in res.scores}
    assert set(by) == {"seed-a", "seed-b", "seed-c", "seed-d"}
    assert (by["seed-a"].k, by["seed-a"].n, by["seed-c"].k, by["seed-c"].n) == (4, 8, 4, 9)
    assert by["seed-a"].in_band and by["seed-c"].in_band and not by["seed-b"].in_band
    assert by["seed-d"].p_hat is None and not by["seed-d"].in_band
    assert res.in_band_share == pytest.approx(2 / 3)
    want = score_batches([("seed-a", 4, 8), ("seed-b", 3, 8), ("seed-c", 4, 9), ("seed-d", 0, 0)],
                         CurriculumConfig(beta=20.0, rwr_lambda=3.0))
    assert res == want
    # the nearer-to-α batch gets the larger weight; in-band weights have mean 1
    assert by["seed-a"].weight is not None and by["seed-c"].weight is not None
    assert by["seed-a"].weight > 1.0 > by["seed-c"].weight
    assert (by["seed-a"].weight + by["seed-c"].weight) / 2 == pytest.approx(1.0)

    first_rows = _rows(any_sessions, run)
    again = await client.score(ScoreRequest(run_id=run, epoch=0))
    assert again == res and _rows(any_sessions, run) == first_rows and len(first_rows) == 4
    assert await client.stored_scores(run, 0) == res

    # New verdicts arrive for seed-b (now 4/9 … in band): rescoring updates rows in place.
    with session_scope(any_sessions) as s:
        _seed(s, run, "seed-b", [[S]], first=7)
    res3 = await client.score(ScoreRequest(run_id=run, epoch=0))
    rows = _rows(any_sessions, run)
    assert len(rows) == 4 and ("seed-b", 4, 9, True) == rows[1][:4]
    assert res3.in_band_share == pytest.approx(1.0)
    with session_scope(any_sessions) as s:
        assert s.scalar(select(func.count()).select_from(CurriculumScoreRow)
                        .where(CurriculumScoreRow.run_id == run)) == 4


async def test_raw_counts_use_defaults_overrides_or_the_runs_settings(
    client: CurriculumClient, any_sessions: sessionmaker[Session]
) -> None:
    counts = [SuccessCounts(seed_id="x", k=5, n=10), SuccessCounts(seed_id="y", k=3, n=10),
              SuccessCounts(seed_id="z", k=0, n=0)]
    default = await client.score(ScoreRequest(counts=counts))
    assert default == score_batches([("x", 5, 10), ("y", 3, 10), ("z", 0, 0)], CurriculumConfig())
    shifted = await client.score(ScoreRequest(counts=counts, alpha=0.3, k_min=0.05, use_beta_prior=True))
    y = shifted.scores[1]
    assert y.p_hat == pytest.approx(4 / 12) and y.in_band  # |4/12 − 0.3| = 0.033 ≤ 0.05
    run = _epoch(any_sessions, beta=5.0)
    with_run = await client.score(ScoreRequest(run_id=run, counts=counts))
    assert with_run.scores[1].r_env == pytest.approx(math.exp(-5.0 * 0.04))
    assert _rows(any_sessions, run) == []  # raw counts are never stored


async def test_errors_use_the_envelope(client: CurriculumClient, any_sessions: sessionmaker[Session]) -> None:
    with pytest.raises(ApiError) as e404:
        await client.score(ScoreRequest(run_id="nope", epoch=0))
    assert e404.value.status_code == 404 and e404.value.type == "not_found_error"
    run = _epoch(any_sessions)
    with pytest.raises(ApiError) as e400:
        await client.score(ScoreRequest(run_id=run, epoch=0, beta=2.0))
    assert e400.value.status_code == 400 and e400.value.code == "override_not_allowed" and e400.value.param == "beta"
    with pytest.raises(ApiError) as empty:
        await client.score(ScoreRequest())
    assert empty.value.status_code == 400
    with pytest.raises(ApiError) as e404b:
        await client.task_ledger("nope")
    assert e404b.value.status_code == 404


async def test_validation_and_auth(any_sessions: sessionmaker[Session]) -> None:
    app = create_app(GenEnvSettings(auth={"tokens": [TOKEN]}), sessions=any_sessions)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://c") as raw:
        r = await raw.post("/v1/score", json={"counts": [{"key": "a", "k": 3, "n": 2}]},
                           headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 422 and r.json()["error"]["type"] == "invalid_request_error"
        assert "exceeds n" in r.json()["error"]["message"]
        r = await raw.post("/v1/score", json={"counts": []})
        assert r.status_code == 401 and set(r.json()["error"]) >= {"message", "type"}


async def test_score_counts_name_their_seed_as_the_answer_does(any_sessions: sessionmaker[Session]) -> None:
    """counts[].seed_id, as in scores[].seed_id; the old name counts[].key still works, and both at once is a 422."""
    app = create_app(GenEnvSettings(auth={"tokens": [TOKEN]}), sessions=any_sessions)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://c") as raw:
        new = await raw.post("/v1/score", json={"counts": [{"seed_id": "s1", "k": 4, "n": 8}]}, headers=auth)
        old = await raw.post("/v1/score", json={"counts": [{"key": "s1", "k": 4, "n": 8}]}, headers=auth)
        both = await raw.post("/v1/score", json={"counts": [{"seed_id": "s1", "key": "s1", "k": 4, "n": 8}]},
                              headers=auth)
    assert new.status_code == old.status_code == 200, (new.text, old.text)
    assert new.json() == old.json() and [s["seed_id"] for s in new.json()["scores"]] == ["s1"]
    assert both.status_code == 422 and "not both" in both.json()["error"]["message"]
    schema = app.openapi()["components"]["schemas"]["SuccessCounts"]
    assert "seed_id" in schema["properties"] and "key" not in schema["properties"]


async def test_ledger_endpoints_page_through_the_repository(
    client: CurriculumClient, any_sessions: sessionmaker[Session]
) -> None:
    run = _epoch(any_sessions)
    got, cursor = [], None
    while True:
        page = await client.task_ledger(run, cursor=cursor, limit=2)
        got.extend(page.items)
        if not (cursor := page.next_cursor):
            break
    with session_scope(any_sessions) as s:
        assert got == ledger.task_ledger(s, run)
        seeds = ledger.seed_ledger(s, run)
    assert (await client.seed_ledger(run, limit=50)).items == seeds
    only_a = await client.task_ledger(run, seed_id="seed-a", epoch=0)
    assert {t.seed_id for t in only_a.items} == {"seed-a"} and len(only_a.items) == 2
