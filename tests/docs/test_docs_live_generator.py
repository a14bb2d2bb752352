"""docs/live-task-generator.md: its field tables match the contracts, the export it documents is what
`genenv export` writes, and its Python snippets run (the generator ones against a real simulator service)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from docs_helpers import DOCS, code_blocks, section, table_first_column, table_rows
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from genenv.cli.main import app
from genenv.contracts.runs import RunConfig
from genenv.contracts.tasks import GeneratedTask, GenerateRequest, RejectionReason, TaskStatus
from genenv.db.engine import make_engine, make_session_factory, session_scope
from genenv.db.migrate import upgrade
from genenv.db.models import RolloutRow, TaskRow, VerdictRow
from genenv.db.repositories import runs
from genenv.db.repositories import tasks as task_repo
from genenv.domains import domain_names, get_domain
from genenv.settings import GenEnvSettings
from tests.conftest import free_port

DOC = DOCS / "live-task-generator.md"


def _text() -> str:
    return DOC.read_text()


def _python_blocks() -> list[str]:
    return code_blocks(_text(), "python")


def _block_defining(name: str) -> str:
    return next(b for b in _python_blocks() if f"def {name}(" in b)


def test_request_table_matches_generate_request() -> None:
    text = section(_text(), "Request: `POST /v1/tasks:generate`")
    assert set(table_first_column(text)) == set(GenerateRequest.model_fields)
    domains = table_rows(text)["domain"]
    assert sorted(name for name in domain_names() if f"`{name}`" in domains) == domain_names()


def test_response_tables_match_the_contracts() -> None:
    text = section(_text(), "Response")
    rows = table_first_column(text)
    assert set(rows) == set(GeneratedTask.model_fields) | {r.value for r in RejectionReason}
    assert [r for r in rows if r in {x.value for x in RejectionReason}] == [r.value for r in RejectionReason]


def test_python_snippets_are_valid_python() -> None:
    blocks = _python_blocks()
    assert len(blocks) >= 4
    for block in blocks:
        ast.parse(block)


@pytest.fixture
def exported_db(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A SQLite database with one run: a valid arithmetic task with 3 valid verdicts (2 successes) and one
    invalid verdict, and one rejected task. Yields (database url, run id)."""
    url = f"sqlite:///{tmp_path / 'export.db'}"
    upgrade(url)
    engine = make_engine(GenEnvSettings(database={"url": url}).database)
    domain = get_domain("arithmetic")
    payload = domain.validate_generation({"expression": "12 + 7"}, None)
    tasks = [
        GeneratedTask(seed_id="s1", domain="arithmetic", variation=0, payload=payload, status=TaskStatus.VALID),
        GeneratedTask(
            seed_id="s1", domain="arithmetic", variation=1, status=TaskStatus.REJECTED,
            rejection_reason=RejectionReason.NOT_JSON, rejection_detail="no JSON object",
        ),
    ]
    with session_scope(make_session_factory(engine)) as s:
        run_id = runs.create(s, RunConfig(name="export")).id
        task_repo.store_generated(s, run_id, 0, tasks)
        valid = s.query(TaskRow).filter_by(run_id=run_id, status="valid").one()
        _attempts(s, valid.id, ["19", "12 + 7 = 19", "18", "nineteen"])
    engine.dispose()
    yield url, run_id


def _attempts(s: Session, task_id: int, replies: list[str]) -> None:
    domain = get_domain("arithmetic")
    task = s.get(TaskRow, task_id)
    assert task is not None and task.payload is not None
    for i, reply in enumerate(replies):
        rollout = RolloutRow(task_id=task_id, attempt=i, response=reply)
        s.add(rollout)
        s.flush()
        verdict = domain.verify(task.payload, reply)
        s.add(
            VerdictRow(
                rollout_id=rollout.id, valid=verdict.valid, score=verdict.score, success=verdict.success,
                error_kind=(verdict.error or verdict.form_error).kind.value
                if verdict.error or verdict.form_error else None,
            )
        )


def _documented_columns() -> tuple[set[str], set[str]]:
    text = section(_text(), "Exporting a run's tasks for verl or TRL")
    rows = table_rows(text)
    extra = {name for name in rows["extra_info"].replace("`", " ").replace(",", " ").split()}
    return set(rows), extra


def _export(url: str, run_id: str, out: Path, fmt: str) -> list[dict[str, Any]]:
    env = {"GENENV_DATABASE__URL": url}
    result = CliRunner().invoke(app, ["export", run_id, "--format", fmt, "--out", str(out), "--status", "all"], env=env)
    assert result.exit_code == 0, result.output
    if fmt == "parquet":
        import pyarrow.parquet as pq

        rows: list[dict[str, Any]] = pq.read_table(out).to_pylist()
        return rows
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_export_writes_the_documented_columns(exported_db: tuple[str, str], tmp_path: Path, fmt: str) -> None:
    url, run_id = exported_db
    rows = _export(url, run_id, tmp_path / f"tasks.{fmt}", fmt)
    columns, extra = _documented_columns()
    assert len(rows) == 2
    for row in rows:
        assert set(row) == columns
        assert set(row["extra_info"]) == extra
        assert row["data_source"] == "genenv/arithmetic" and row["ability"] == "arithmetic"
        assert row["reward_model"]["style"] == "rule"
    valid, rejected = rows
    # n counts valid verdicts only: "nineteen" has no integer, so its verdict is invalid and left out.
    # "nineteen" has no integer: a wrong answer that counts (METHOD.md Eq. 1), so 2 of 4.
    assert (valid["extra_info"]["n"], valid["extra_info"]["k"]) == (4, 2)
    assert valid["extra_info"]["p_hat"] == pytest.approx(0.5) and valid["extra_info"]["p_beta"] == pytest.approx(0.5)
    assert valid["prompt"] == [{"role": "user", "content": "What is 12 + 7? Reply with the number only."}]
    assert rejected["prompt"] == [] and rejected["extra_info"]["rejection_reason"] == "not_json"


def test_documented_reward_functions_score_exported_rows(exported_db: tuple[str, str], tmp_path: Path) -> None:
    url, run_id = exported_db
    row = _export(url, run_id, tmp_path / "tasks.parquet", "parquet")[0]
    namespace: dict[str, Any] = {}
    exec(compile(_block_defining("compute_score"), "verl_reward", "exec"), namespace)
    compute_score = namespace["compute_score"]
    truth = row["reward_model"]["ground_truth"]
    assert compute_score(row["data_source"], "12 + 7 = 19", truth, row["extra_info"]) == 1.0
    assert compute_score(row["data_source"], "18", truth, row["extra_info"]) == 0.0
    assert compute_score(row["data_source"], "nineteen", truth) == 0.0

    exec(compile(_block_defining("genenv_reward"), "trl_reward", "exec"), namespace)
    rewards = namespace["genenv_reward"](
        completions=[[{"role": "assistant", "content": "19"}], [{"role": "assistant", "content": "20"}], "19"],
        data_source=[row["data_source"]] * 3,
        reward_model=[row["reward_model"]] * 3,
        extra_info=[row["extra_info"]] * 3,
        prompts=[row["prompt"]] * 3,
    )
    assert rewards == [1.0, 0.0, 1.0]


def test_documented_reward_functions_score_a_data_defined_domains_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exported task of a user's own domain (`genenv domains add`), scored by the documented helpers in a
    process with no database at all: the payload names its kind."""
    from genenv.domains.data.domain import check_seed_file

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GENENV_DATABASE__URL", f"sqlite:///{tmp_path / 'none' / 'genenv.db'}")
    seed_file = "\n".join(json.dumps({"question": f"What is {n} plus {n}?", "answer": str(2 * n)})
                          for n in range(1, 9))
    domain, report = check_seed_file("sums", "exact_answer", seed_file, {"normalize": "number"})
    assert report.ok
    payload = domain.tag(report.train[0].payload)
    truth, source = json.dumps(payload), "genenv/sums"
    answer = str(2 * int(payload["question"].split()[2]))  # "What is N plus N?"
    namespace: dict[str, Any] = {}
    exec(compile(_block_defining("compute_score"), "verl_reward", "exec"), namespace)
    assert namespace["compute_score"](source, answer, truth) == 1.0
    assert namespace["compute_score"](source, "-1", truth) == 0.0
    exec(compile(_block_defining("genenv_reward"), "trl_reward", "exec"), namespace)
    assert namespace["genenv_reward"](completions=[answer, "-1"], data_source=[source] * 2,
                                      reward_model=[{"ground_truth": truth}] * 2) == [1.0, 0.0]
    assert not (tmp_path / "none").exists()


@pytest.fixture
def simulator_url(vllm_url: str, benchmarks_dir: Path, tmp_path: Path) -> Iterator[str]:
    """`genenv serve simulator` started the way the doc says, on the real vLLM server."""
    port = free_port()
    env = {
        **os.environ,
        "GENENV_INFERENCE__BACKEND": "vllm",
        "GENENV_SERVICES__VLLM_SIMULATOR": vllm_url,
        "GENENV_INFERENCE__SERVED_MODEL_NAME": "base",
        "GENENV_PATHS__BENCHMARKS": str(benchmarks_dir),
        "GENENV_AUTH__TOKENS": '["docs-token"]',
        "GENENV_DATABASE__URL": f"sqlite:///{tmp_path / 'sim.db'}",
    }
    log = (tmp_path / "simulator.log").open("wb")
    cmd = [sys.executable, "-m", "genenv.cli.main", "serve", "simulator", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "simulator.log").read_text()
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise AssertionError("the simulator did not become ready in 120 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.parametrize("snippet", ["SimulatorClient", "httpx.Client"])
def test_generator_snippets_run_against_a_real_simulator(simulator_url: str, snippet: str) -> None:
    code = next(b for b in _python_blocks() if f"with {snippet}(" in b)
    env = {**os.environ, "GENENV_SIM_URL": simulator_url, "GENENV_TOKEN": "docs-token"}
    env.pop("GENENV_SIM_ADAPTER", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "not_json" in out.stdout  # rejection_counts printed: a full answer came back
