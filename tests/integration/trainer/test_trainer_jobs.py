"""Trainer jobs end to end on a tiny model: claim, train, adapter version + row, idempotency, failures."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest
from trn_helpers import adapters_of, add_group, agent_epoch, job, run_config, settings_for

from genenv.contracts.adapters import JobKind, JobStatus
from genenv.db.engine import session_scope
from genenv.db.models import AdapterRow, CurriculumScoreRow, utcnow
from genenv.db.repositories import runs, train_jobs
from genenv.db.repositories.train_jobs import ClaimOutcome
from genenv_curriculum.scoring import score_epoch
from genenv_trainer.jobs import EpochNotScoredError, run_train_job


def test_train_agent_writes_one_version_and_a_redelivery_exits(
    sessions, db_url: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    settings = settings_for(db_url, tmp_path)
    run = agent_epoch(sessions, run_config(tiny_model_dir))
    job_id = job(sessions, run, 0, JobKind.TRAIN_AGENT)

    first = run_train_job(sessions, settings, job_id)
    assert first.outcome is ClaimOutcome.CLAIMED and first.job.status is JobStatus.DONE
    assert first.job.adapter_version == 1 and first.job.attempts == 1
    m = first.job.metrics
    assert (m["groups"], m["groups_zero_variance"], m["groups_too_small"]) == (4, 1, 1)
    # The default budget counts tasks (agent.budget = tasks): the two informative groups and the flat one (8 + 4
    # valid attempts) fill 12 of the budget's 16 sequences in batches of 8, two steps; the flat group's 4 give no
    # gradient, and the group with one valid attempt is never a group.
    assert m["budget"] == "tasks" and m["fresh_groups_used"] == 3 and m["fresh_groups_used_with_signal"] == 2
    assert m["sequences"] == 12 and m["sequences_without_signal"] == 4
    assert m["steps"] == 2 and m["examples_seen"] == 12
    assert m["tokens"] > 0 and m["seconds"] > 0 and m["peak_rss_mb"] > 0 and m["ratio_fallback"] == 12
    assert {"loss", "kl", "clip_fraction", "seconds_per_step"} <= set(m)
    path = tmp_path / run / "agent" / "v1"
    assert (path / "adapter_config.json").exists() and (path / "adapter_model.safetensors").exists()
    assert (path / "optimizer.pt").exists() and m["optimizer_resumed"] is False
    assert adapters_of(sessions, run) == [("agent", 1, None)]

    again = run_train_job(sessions, settings, job_id)  # the same job delivered twice
    assert again.outcome is ClaimOutcome.FINISHED and again.job.attempts == 1
    assert adapters_of(sessions, run) == [("agent", 1, None)]
    assert sorted(p.name for p in (tmp_path / run / "agent").iterdir()) == ["v1"]

    # Next epoch: a new job continues from v1.
    agent_epoch(sessions, run_config(tiny_model_dir), epoch=1, run=run)
    nxt = run_train_job(sessions, settings, job(sessions, run, 1, JobKind.TRAIN_AGENT))
    assert nxt.job.adapter_version == 2 and nxt.job.metrics["parent_version"] == 1
    # ... and its AdamW state: v1 took 2 steps, so v2's optimiser starts at step 2, not from scratch.
    assert nxt.job.metrics["optimizer_resumed"] is True and nxt.job.metrics["optimizer_prior_steps"] == 2
    assert adapters_of(sessions, run) == [("agent", 1, None), ("agent", 2, 1)]


def test_replay_mixes_earlier_groups(sessions, db_url: str, tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = run_config(tiny_model_dir, curriculum={"replay_ratio": 0.5},
                     agent={"batch_size": 16, "micro_batch_size": 8, "max_steps_per_epoch": 1})
    run = agent_epoch(sessions, cfg)
    agent_epoch(sessions, cfg, epoch=1, run=run)
    res = run_train_job(sessions, settings_for(db_url, tmp_path), job(sessions, run, 1, JobKind.TRAIN_AGENT))
    m = res.job.metrics
    assert m["replay_candidates"] == 2 and m["replay_groups_used"] == 2 and m["fresh_groups_used"] == 2
    assert m["sequences"] == 4 + 5 + 4 + 5 - 2  # invalid verdicts are not trained on
    assert m["replayed_seen"] == 8 and m["fresh_seen"] == 8


def _score_epoch(sessions, run: str) -> None:
    with session_scope(sessions) as s:
        score_epoch(s, run, 0)


def test_train_simulator_uses_in_band_generations(sessions, db_url: str, tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = run_config(tiny_model_dir, curriculum={"rwr_lambda": 5.0})
    run = agent_epoch(sessions, cfg)  # seed-a: 3/8 valid successes... out of band; seed-b: 5/5 out of band
    with session_scope(sessions) as s:
        add_group(s, run, 0, "seed-c", 0, [1.0, 0.0, 1.0, 0.0])
        add_group(s, run, 0, "seed-c", 1, [1.0, 0.0, 0.0, 1.0])       # 4/8: in band
        add_group(s, run, 0, "seed-d", 0, [1.0, 0.0, 0.0, 1.0, 0.0])  # 2/5 = 0.4: in band, lower weight
    # Not scored yet: only the curriculum service scores, so the job fails clearly and trains nothing.
    unscored = job(sessions, run, 0, JobKind.TRAIN_SIMULATOR)
    with pytest.raises(EpochNotScoredError, match="no curriculum scores"):
        run_train_job(sessions, settings_for(db_url, tmp_path, max_attempts=2), unscored)
    assert adapters_of(sessions, run) == []
    _score_epoch(sessions, run)
    res = run_train_job(sessions, settings_for(db_url, tmp_path), unscored)
    m = res.job.metrics
    assert res.job.status is JobStatus.DONE and res.job.adapter_version == 1
    assert m["pool_size"] == 3 and m["pool_fresh"] == 3 and m["seed_batches"] == 2 and not m["early_stopped"]
    assert m["steps"] == 1 and m["examples_seen"] == 3  # one pass over the pool in a batch of 4
    assert m["weight_max"] > 1.0 > m["weight_min"]
    with session_scope(sessions) as s:
        banded = s.query(CurriculumScoreRow).filter_by(run_id=run, epoch=0, in_band=True).count()
    assert banded == 2
    assert adapters_of(sessions, run) == [("simulator", 1, None)]
    assert (tmp_path / run / "simulator" / "v1" / "adapter_model.safetensors").exists()


def test_simulator_job_is_skipped_without_in_band_data_or_in_baseline_modes(
    sessions, db_url: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    settings = settings_for(db_url, tmp_path)
    run = agent_epoch(sessions, run_config(tiny_model_dir))
    _score_epoch(sessions, run)
    res = run_train_job(sessions, settings, job(sessions, run, 0, JobKind.TRAIN_SIMULATOR))
    assert res.job.status is JobStatus.SKIPPED and res.job.metrics["reason"] == "no in-band generation"
    baseline = agent_epoch(sessions, run_config(tiny_model_dir, mode="random_simulator"))
    res = run_train_job(sessions, settings, job(sessions, baseline, 0, JobKind.TRAIN_SIMULATOR))
    assert res.job.status is JobStatus.SKIPPED and "random_simulator" in res.job.metrics["reason"]
    assert adapters_of(sessions, run) == [] and adapters_of(sessions, baseline) == []


def test_agent_job_without_signal_is_skipped(sessions, db_url: str, tiny_model_dir: Path, tmp_path: Path) -> None:
    with session_scope(sessions) as s:
        run = runs.create(s, run_config(tiny_model_dir)).id
        add_group(s, run, 0, "seed-a", 0, [1.0, 1.0, 1.0])
    res = run_train_job(sessions, settings_for(db_url, tmp_path), job(sessions, run, 0, JobKind.TRAIN_AGENT))
    assert res.job.status is JobStatus.SKIPPED and res.job.metrics["groups_zero_variance"] == 1
    assert res.job.adapter_version is None and adapters_of(sessions, run) == []


def test_a_failing_job_is_recorded_retried_and_finally_given_up(
    sessions, db_url: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    settings = settings_for(db_url, tmp_path, max_attempts=2)
    run = agent_epoch(sessions, run_config(tmp_path / "no-such-model"))
    job_id = job(sessions, run, 0, JobKind.TRAIN_AGENT)
    for attempt in (1, 2):
        with pytest.raises(Exception, match="no-such-model"):
            run_train_job(sessions, settings, job_id)
        with session_scope(sessions) as s:
            row = train_jobs.get_job(s, job_id)
            assert (row.status, row.attempts) == ("failed", attempt) and "no-such-model" in (row.error or "")
    res = run_train_job(sessions, settings, job_id)
    assert res.outcome is ClaimOutcome.EXHAUSTED and "gave up after 2" in (res.job.error or "")


@pytest.mark.parametrize("kind", [JobKind.TRAIN_AGENT, JobKind.TRAIN_SIMULATOR])
def test_a_nan_step_fails_the_job_and_writes_nothing(
    sessions, db_url: str, tiny_model_dir: Path, tmp_path: Path, kind: JobKind
) -> None:
    """A non-finite loss fails the step before the optimiser applies it: no adapter file, no adapter row, the job
    failed with the reason (and, once its attempts are spent, the run fails with it)."""
    settings = settings_for(db_url, tmp_path, max_attempts=1, fault_nan_at_step=0)
    run = agent_epoch(sessions, run_config(tiny_model_dir, curriculum={"k_min": 0.5}))
    _score_epoch(sessions, run)
    job_id = job(sessions, run, 0, kind)
    with pytest.raises(Exception, match="non-finite loss"):
        run_train_job(sessions, settings, job_id)
    with session_scope(sessions) as s:
        row = train_jobs.get_job(s, job_id)
        assert row.status == "failed" and "NonFiniteError" in (row.error or "") and row.adapter_version is None
    assert adapters_of(sessions, run) == []
    assert not (tmp_path / run).exists()
    assert run_train_job(sessions, settings, job_id).outcome is ClaimOutcome.EXHAUSTED


def test_claims_busy_stale_and_ownership(sessions, db_url: str, tiny_model_dir: Path) -> None:
    run = agent_epoch(sessions, run_config(tiny_model_dir))
    with session_scope(sessions) as s:
        job_id = train_jobs.create_or_get_job(s, run, 0, JobKind.TRAIN_AGENT).id
        assert train_jobs.create_or_get_job(s, run, 0, JobKind.TRAIN_AGENT).id == job_id
    with session_scope(sessions) as s:
        mine = train_jobs.claim_job(s, job_id, worker="w1", lease_s=60, max_attempts=3)
    assert mine.outcome is ClaimOutcome.CLAIMED and mine.token and mine.token.startswith("w1/")
    with session_scope(sessions) as s:
        busy = train_jobs.claim_job(s, job_id, worker="w2", lease_s=60, max_attempts=3)
    assert busy.outcome is ClaimOutcome.BUSY and 0 < (busy.retry_after_s or 0) <= 60
    with session_scope(sessions) as s:
        assert train_jobs.heartbeat(s, job_id, mine.token)
        assert not train_jobs.heartbeat(s, job_id, "w2/someone-else")
    # 61 s later without a heartbeat the claim is stale and the next delivery takes it over.
    later = utcnow() + timedelta(seconds=61)
    with session_scope(sessions) as s:
        taken = train_jobs.claim_job(s, job_id, worker="w2", lease_s=60, max_attempts=3, now=later)
    assert taken.outcome is ClaimOutcome.CLAIMED and taken.job.attempts == 2
    with session_scope(sessions) as s:
        # the old owner can neither heartbeat nor finish any more
        assert not train_jobs.heartbeat(s, job_id, mine.token)
        assert not train_jobs.finish_job(s, job_id, mine.token, status=JobStatus.DONE, adapter_version=9)
        assert train_jobs.finish_job(s, job_id, taken.token or "", status=JobStatus.DONE, adapter_version=1)
    with session_scope(sessions) as s:
        assert train_jobs.claim_job(s, job_id, worker="w3", lease_s=60, max_attempts=3).outcome is ClaimOutcome.FINISHED
        assert s.query(AdapterRow).filter_by(run_id=run).count() == 0


def test_concurrent_deliveries_claim_a_job_once(sessions, tiny_model_dir: Path) -> None:
    run = agent_epoch(sessions, run_config(tiny_model_dir))
    job_id = job(sessions, run, 0, JobKind.TRAIN_AGENT)
    barrier = threading.Barrier(6)

    def deliver(i: int) -> ClaimOutcome:
        barrier.wait()
        with session_scope(sessions) as s:
            return train_jobs.claim_job(s, job_id, worker=f"w{i}", lease_s=600, max_attempts=3).outcome

    with ThreadPoolExecutor(6) as pool:
        outcomes = list(pool.map(deliver, range(6)))
    assert outcomes.count(ClaimOutcome.CLAIMED) == 1 and outcomes.count(ClaimOutcome.BUSY) == 5
    with session_scope(sessions) as s:
        assert train_jobs.get_job(s, job_id).attempts == 1


def test_a_cancelled_run_trains_nothing(sessions, db_url: str, tiny_model_dir: Path, tmp_path: Path) -> None:
    from genenv.contracts.runs import RunStatus
    from genenv.db.models import RunRow

    settings = settings_for(db_url, tmp_path)
    run = agent_epoch(sessions, run_config(tiny_model_dir))
    job_id = job(sessions, run, 0, JobKind.TRAIN_AGENT)
    with session_scope(sessions) as s:
        row = s.get(RunRow, run)
        assert row is not None
        row.status = RunStatus.CANCELLED.value
    result = run_train_job(sessions, settings, job_id)
    assert result.job.status is JobStatus.SKIPPED and "cancelled" in result.job.metrics["reason"]
    assert adapters_of(sessions, run) == []
    assert not (tmp_path / run).exists()


def _generic_epoch(sessions, cfg, epoch: int, run: str | None = None) -> str:
    """Four out-of-band groups (agent_epoch) plus three in-band generations (seed-c twice, seed-d once)."""
    run = agent_epoch(sessions, cfg, epoch=epoch, run=run)
    with session_scope(sessions) as s:
        add_group(s, run, epoch, "seed-c", 0, [1.0, 0.0, 1.0, 0.0])
        add_group(s, run, epoch, "seed-c", 1, [1.0, 0.0, 0.0, 1.0])
        add_group(s, run, epoch, "seed-d", 0, [1.0, 0.0, 0.0, 1.0, 0.0])
    with session_scope(sessions) as s:
        score_epoch(s, run, epoch)
    return run


def test_generic_rwr_pool_is_random_size_matched_and_unweighted(sessions, tiny_model_dir: Path) -> None:
    from genenv_trainer import inputs

    cfg = run_config(tiny_model_dir, mode="generic_rwr")
    run = _generic_epoch(sessions, cfg, 0)
    with session_scope(sessions) as s:
        band = inputs.pool_generations(s, run, 0, max_size=100)
        picks = {seed: inputs.generic_pool_generations(s, run, 0, max_size=100, seed=seed) for seed in range(40)}
    assert len(band) == 3  # what genenv's band rule selects from this epoch
    assert all(len(p) == 3 and all(g.weight == 1.0 for g in p) for p in picks.values())
    drawn = {g.task_id for p in picks.values() for g in p}
    assert len(drawn) == 7  # every one of the epoch's 7 valid generations is drawn by some seed, not only in-band
    assert {g.task_id for g in band} != {g.task_id for g in picks[0]} or len(
        {frozenset(g.task_id for g in p) for p in picks.values()}) > 1
    # Next epoch: the pool grows by that epoch's band count and keeps epoch 0's picks.
    _generic_epoch(sessions, cfg, 1, run=run)
    with session_scope(sessions) as s:
        later = inputs.generic_pool_generations(s, run, 1, max_size=100, seed=5)
        recent = inputs.generic_pool_generations(s, run, 1, max_size=100, seed=5, recent_epochs=1)
        capped = inputs.generic_pool_generations(s, run, 1, max_size=4, seed=5)
    assert [g.epoch for g in later] == [1, 1, 1, 0, 0, 0]
    assert {g.task_id for g in later if g.epoch == 0} == {g.task_id for g in picks[5]}
    assert [g.epoch for g in recent] == [1, 1, 1] and [g.epoch for g in capped] == [1, 1, 1, 0]


def test_train_simulator_in_generic_rwr_trains_at_the_same_dose(
    sessions, db_url: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    cfg = run_config(tiny_model_dir, mode="generic_rwr")
    run = _generic_epoch(sessions, cfg, 0)
    res = run_train_job(sessions, settings_for(db_url, tmp_path), job(sessions, run, 0, JobKind.TRAIN_SIMULATOR))
    m = res.job.metrics
    assert res.job.status is JobStatus.DONE and res.job.adapter_version == 1
    assert m["pool_size"] == 3 and m["steps"] == 1 and m["examples_seen"] == 3  # genenv's test above: the same
    assert m["weight_max"] == m["weight_min"] == 1.0
    assert adapters_of(sessions, run) == [("simulator", 1, None)]
