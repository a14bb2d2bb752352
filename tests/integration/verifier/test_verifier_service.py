"""POST /v1/verify: verdicts in order, per-item failures, bounded batches — in-process and over real HTTP."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from genenv.checkers.base import valid_verdict
from genenv.clients.base import ApiError
from genenv.clients.verifier import VerifierClient
from genenv.contracts.rollouts import Verdict, VerdictErrorKind, VerifyItem, VerifyRequest
from genenv.domains import get_domain
from genenv.domains.base import Domain
from genenv.domains.function_calling.domain import gold_answer
from genenv.inference.launcher import started
from genenv_verifier.verification import verify_items

FC = get_domain("function_calling")


def _fc_items(benchmarks_dir: Path, n: int) -> list[VerifyItem]:
    seeds = FC.load_seeds(benchmarks_dir, "train")[:n]
    return [VerifyItem(domain="function_calling", task=s.payload, response=gold_answer(s.payload)) for s in seeds]


async def test_batch_verdicts_come_back_in_order_and_match_the_domain(
    client: VerifierClient, benchmarks_dir: Path
) -> None:
    items = _fc_items(benchmarks_dir, 40)
    items[3] = items[3].model_copy(update={"response": "I do not know."})
    items.insert(5, VerifyItem(domain="arithmetic", task={"expression": "2 + 3"}, response="2 + 3 = 5"))
    items.insert(6, VerifyItem(domain="arithmetic", task={"expression": "2 + 3"}, response="6"))
    response = await client.verify(VerifyRequest(items=items))
    assert len(response.verdicts) == len(items)
    for item, verdict in zip(items, response.verdicts, strict=True):
        assert verdict == get_domain(item.domain).verify(item.task, item.response)
    assert response.verdicts[5].score == 1.0 and response.verdicts[6].score == 0.0


async def test_malformed_items_get_their_verdict_kind_alone(
    client: VerifierClient, benchmarks_dir: Path
) -> None:
    good = _fc_items(benchmarks_dir, 1)[0]
    task = good.task
    cases = [
        (VerifyItem(domain="function_calling", task=task, response="not a call"), VerdictErrorKind.PARSE_ERROR),
        (VerifyItem(domain="function_calling", task=task, response='[{"f": {"a": 1}'), VerdictErrorKind.PARSE_ERROR),
        (VerifyItem(domain="function_calling", task=task, response='{"x": 1}'), VerdictErrorKind.SCHEMA_ERROR),
        (
            VerifyItem(domain="function_calling", task=task, response="[f(x='" + "y" * 50_000 + "')]"),
            VerdictErrorKind.TOO_LARGE,
        ),
        (VerifyItem(domain="function_calling", task={"broken": True}, response="[f()]"), VerdictErrorKind.TASK_ERROR),
        (VerifyItem(domain="no_such_domain", task={}, response="x"), VerdictErrorKind.TASK_ERROR),
    ]
    response = await client.verify(VerifyRequest(items=[good, *(c[0] for c in cases), good]))
    verdicts = response.verdicts
    assert verdicts[0].score == 1.0 and verdicts[-1].score == 1.0
    for verdict, (_, kind) in zip(verdicts[1:-1], cases, strict=True):
        if kind in {VerdictErrorKind.PARSE_ERROR, VerdictErrorKind.SCHEMA_ERROR}:
            # The agent's own malformed reply: a wrong answer (score 0) that counts, the reason kept.
            assert verdict.valid and verdict.score == 0.0 and verdict.form_error.kind is kind
        else:  # not the agent's fault: invalid, never a zero
            assert not verdict.valid and verdict.score is None and verdict.error.kind is kind


async def test_success_threshold_is_passed_through(client: VerifierClient) -> None:
    items = [VerifyItem(domain="arithmetic", task={"expression": "1 + 1"}, response="2")]
    response = await client.verify(VerifyRequest(items=items, success_threshold=1.0))
    assert response.verdicts[0].success


class _Hostile(Domain):
    """A domain whose checker throws for 'boom' and never ends for 'spin' (to show per-item isolation)."""

    name = "hostile"

    def load_seeds(self, benchmarks_dir: Any, split: str = "train") -> list[Any]:
        return []

    def simulator_messages(self, seed: Any, n: int, *, target_success: Any, stats: Any) -> list[Any]:
        return []

    def task_json_schema(self) -> dict[str, Any]:
        return {}

    def validate_generation(self, obj: dict[str, Any], seed: Any) -> dict[str, Any]:
        return obj

    def agent_messages(self, task: dict[str, Any]) -> list[Any]:
        return []

    def verify(self, task: dict[str, Any], response: str, success_threshold: float | None = None) -> Verdict:
        if response == "boom":
            raise RuntimeError("checker bug")
        while response == "spin":
            pass
        return valid_verdict(1.0, 1.0)


def test_a_throwing_or_hanging_checker_invalidates_only_its_item() -> None:
    hostile = _Hostile()
    items = [VerifyItem(domain="hostile", task={}, response=r) for r in ("ok", "boom", "ok", "spin", "ok")]
    started = time.perf_counter()
    verdicts = verify_items(items, None, 0.2, lookup=lambda name, task: hostile)
    assert time.perf_counter() - started < 5
    assert [v.valid for v in verdicts] == [True, False, True, False, True]
    assert verdicts[1].error.kind is VerdictErrorKind.CHECKER_ERROR
    assert verdicts[3].error.kind is VerdictErrorKind.TIMEOUT


async def test_batches_beyond_the_item_limit_are_422(benchmarks_dir: Path, tmp_path: Path) -> None:
    from genenv_verifier.app import create_app
    from tests.integration.verifier.verifier_support import verifier_settings

    settings = verifier_settings(benchmarks_dir, max_items=3, max_body_bytes=50_000)
    settings.database.url = f"sqlite:///{tmp_path / 'v.db'}"
    app = create_app(settings)
    items = _fc_items(benchmarks_dir, 4)
    async with VerifierClient("http://v", transport=httpx.ASGITransport(app)) as c:
        assert len((await c.verify(VerifyRequest(items=items[:3]))).verdicts) == 3
        with pytest.raises(ApiError) as err:
            await c.verify(VerifyRequest(items=items))
        assert err.value.status_code == 422 and err.value.code == "too_many_items"
        big = [items[0].model_copy(update={"response": "x" * 30_000})] * 3
        with pytest.raises(ApiError) as err:
            await c.verify(VerifyRequest(items=big))
        assert err.value.status_code == 413
        with pytest.raises(ApiError) as err:
            await c.verify(VerifyRequest.model_construct(items=items[:1] * 5000, success_threshold=None))
        assert err.value.status_code in (413, 422)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://v") as raw:
        bad = await raw.post("/v1/verify", json={"items": [{"domain": "", "task": {}, "response": "x"}]})
        assert bad.status_code == 422 and bad.json()["error"]["param"].startswith("items")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_served_process_verifies_over_loopback(benchmarks_dir: Path, tmp_path: Path) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "GENENV_DATABASE__URL": f"sqlite:///{tmp_path / 'served.db'}",
        "GENENV_PATHS__BENCHMARKS": str(benchmarks_dir),
    }
    argv = [sys.executable, "-m", "genenv.cli.main", "serve", "verifier", "--port", str(port)]
    with started(argv, f"http://127.0.0.1:{port}", path="/healthz", timeout_s=60, poll_s=0.2,
                 log=tmp_path / "verifier.log", env=env, stop_timeout_s=20) as server:
        items = _fc_items(benchmarks_dir, 20)
        body = VerifyRequest(items=items).model_dump(mode="json")
        response = httpx.post(f"{server.url}/v1/verify", json=body, timeout=30)
        assert response.status_code == 200
        assert [v["score"] for v in response.json()["verdicts"]] == [1.0] * 20
        assert response.headers.get("x-request-id")
