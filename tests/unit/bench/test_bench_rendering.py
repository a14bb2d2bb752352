"""The bench mains split into arguments, measuring and rendering: each renderer prints its table from measured
rows alone (no model, server or GPU)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from tests.unit.bench import scripts


def test_train_step_renders_the_step_and_memory_tables(capsys: pytest.CaptureFixture[str]) -> None:
    bench = scripts.load("train_step")
    args = bench.parse_args(["--threads", "2", "--checkpointing-min-tokens", "1024"])
    rows = [{"role": role, "device": "cpu", "steps": 3, "first_step_s": 1.5, "median_rest_s": 0.5,
             "tokens_per_step": 2048.0, "peak_mb": 900.0} for role in ("agent", "simulator")]
    memory = [{"seq": s, "loaded_mb": 300.0, "peak_mb": 300.0 + s / 8, "above_mb": s / 8, "seconds": 1.0}
              for s in (256, 1024)]
    bench.render(args, bench.Measured(rows, memory, None, 0.5))
    text = capsys.readouterr().out
    assert "CPU, 2 torch thread(s)" in text and "peak RSS MB" in text
    assert "train_agent" in text and "train_simulator" in text
    assert "      1024       300       428             128    4.00    4.00    1.0" in text
    assert "adapter → vLLM" not in text  # --no-vllm's row is left out


def test_rollout_throughput_sorts_rows_and_renders_ratios() -> None:
    bench = scripts.load("rollout_throughput")
    q = bench.SHAPES[0].name
    rows = [bench.Row("(c) rollout worker, adapter, stored", q, 144, 100, 3000, 10.0),
            bench.Row(bench.SIM_ADAPTER, "6 seeds × n=4", 24, 10, 100, 4.0),
            bench.Row("(a) vLLM direct, base, n=G", q, 144, 100, 3000, 8.0),
            bench.Row(bench.SIM_BASE, "6 seeds × n=4", 24, 10, 100, 2.0)]
    bench.sort_rows(rows)
    assert [r.path[:4] for r in rows] == ["(a) ", "(c) ", "(d) ", "(d) "] and rows[2].path == bench.SIM_BASE
    assert bench.ratio(rows, "(c) ", "(a) ", q) == "0.80" and bench.ratio(rows, "(c) ", "(c0)", q) == "n/a"
    buf = io.StringIO()
    args = bench.parse_args(["--url", "http://x", "--rounds", "1"])
    bench.render(Console(file=buf, width=200), args, rows, bench.Limit({"bfloat16": 10.0, "float32": 5.0}, 10**8),
                 "smollm2")
    text = buf.getvalue()
    assert "limit: matmul 10.0 GFLOP/s bf16, 5.0 GFLOP/s fp32" in text and "50 tokens/s at 2 × 100M" in text
    assert "simulator generation with / without adapter: 0.50 (target ≥ 0.8)" in text


def test_verifier_speed_renders_ratios_against_each_reference() -> None:
    bench = scripts.load("verifier_speed")
    t = bench.Timings(best={"official · text": 2.0, "ours · text": 1.0, "service · HTTP": 4.0},
                      best_cpu={"official · text": 2.0, "ours · text": 1.0, "service · HTTP": 1.0})
    buf = io.StringIO()
    Console(file=buf, width=200).print(bench.render(t, {"official · text": 10, "ours · text": 10,
                                                        "service · HTTP": 9}, 10, 6))
    text = buf.getvalue()
    assert "10 items · best of 6 rounds" in text
    assert "2.00× official · text" in text and "≥ 1.0× met" in text
    assert "0.25× ours · text" in text and "≥ 0.5× MISSED" in text and "9/10" in text
