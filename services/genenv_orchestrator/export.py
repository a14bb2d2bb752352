"""Export a run's tasks with their success statistics as a dataset verl's and TRL's loaders read.

One row per task. Columns (verl's RL parquet schema; TRL's GRPOTrainer reads ``prompt`` and passes the other
columns to reward functions):
- ``data_source`` — ``genenv/<domain>``; ``ability`` — the domain name
- ``prompt`` — the agent's chat messages for the task (list of {"role", "content"})
- ``reward_model`` — ``{"style": "rule", "ground_truth": <task payload as JSON text>}``
- ``extra_info`` — run_id, epoch, task_id, seed_id, variation, status, rejection_reason, n, k, p_hat, p_beta
  (n = valid attempts, k = successes; p_beta = (k+1)/(n+2))
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from genenv import catalogue
from genenv.contracts.tasks import TaskStatus
from genenv.db.models import TaskRow
from genenv.db.repositories import ledger


def export_rows(session: Session, run_id: str, *, status: str = "valid") -> list[dict[str, Any]]:
    """Rows of the export, ordered by task id (status: valid | rejected | all)."""
    stmt = select(TaskRow).where(TaskRow.run_id == run_id).order_by(TaskRow.id)
    if status != "all":
        stmt = stmt.where(TaskRow.status == TaskStatus(status).value)
    stats = {e.task_id: e for e in ledger.task_ledger(session, run_id)}
    rows: list[dict[str, Any]] = []
    for t in session.scalars(stmt):
        st = stats.get(t.id)
        valid = t.status == TaskStatus.VALID.value and t.payload is not None
        prompt = catalogue.for_task(t.domain, t.payload or {}).agent_messages(t.payload or {}) if valid else []
        rows.append(
            {
                "data_source": f"genenv/{t.domain}",
                "ability": t.domain,
                "prompt": prompt,
                "reward_model": {"style": "rule", "ground_truth": json.dumps(t.payload, sort_keys=True)},
                "extra_info": {
                    "run_id": t.run_id, "epoch": t.epoch, "task_id": t.id, "seed_id": t.seed_id,
                    "variation": t.variation, "status": t.status, "rejection_reason": t.rejection_reason,
                    "n": 0 if st is None else st.n, "k": 0 if st is None else st.k,
                    "p_hat": None if st is None else st.p_hat, "p_beta": 0.5 if st is None else st.p_beta,
                },
            }
        )
    return rows


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    """One JSON object per line."""
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    """A parquet file (needs pyarrow, in the `bench` extra)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), str(path))
