"""The CI-sized chaos drill (issue 22, item 4): ``bench/chaos.py --kills 3 --seed 5 --epochs 3`` as a user runs it.

Seed 5's plan kills Postgres (every server process, then crash recovery), the rollout worker and Redis, each after a
delay of its own, during a three-epoch run on ``genenv up`` with throwaway datastores; the drill then checks that the
run completed with exactly one task per (epoch, seed, variation), one rollout per (task, attempt), one verdict per
rollout, one score per (epoch, seed), contiguous adapter versions with the newest served and no job left claimed.
The plan does not kill the vLLM server, so the drill uses the suite's server instead of starting its own. The
20-kill drill with the same seed (whose first three kills are these) and the drills with outages (``--outages``:
victims held down for minutes) are run by hand: docs/deployment.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.vllm, pytest.mark.slow]


def test_three_kills_leave_a_completed_run_with_nothing_lost_or_doubled(
    vllm_url: str, model_dir: Path, benchmarks_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "chaos.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "chaos.py"), "--kills", "3", "--seed", "5", "--epochs", "3",
         "--json", str(out),
         "--vllm-url", vllm_url, "--model-cache", str(model_dir.parent), "--benchmarks", str(benchmarks_dir),
         "--workdir", str(tmp_path)],
        capture_output=True, text=True, timeout=3600,
    )
    report = proc.stdout[-8000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, report
    result = json.loads(out.read_text())
    assert [(f["kind"], f["victim"]) for f in result["faults"]] == [
        ("kill", "postgres"), ("kill", "rollout"), ("kill", "redis")], report
    assert result["status"] == "completed" and not any(result["checks"].values()), report
    assert "every planned fault landed" in result["checks"], report
    assert all(f["recovery_s"] is not None and f["down_s"] == 0.0 for f in result["faults"]), report
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("chaos: 3 kills, invariants hold: yes, max recovery "), last
