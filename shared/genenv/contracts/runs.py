"""Run configuration (every hyperparameter of the method) and run state."""

from __future__ import annotations

import enum
import re
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, Field, StringConstraints, field_validator, model_validator

from genenv.contracts import modes
from genenv.contracts.base import Identifier, ModelName, ReadModel, WriteModel
from genenv.contracts.domains import DOMAIN_NAME_PATTERN
from genenv.contracts.leases import ExternalConfig
from genenv.contracts.modes import DEFAULT_MODE, MODES, ModeName, ModePolicy, TaskSource

SplitName = Annotated[str, StringConstraints(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_.-]+$")]

BENCHMARK_SPLITS: dict[str, tuple[str, ...]] = {
    "arithmetic": ("eval", "heldout"),
    "bfcl": ("eval", "ast", "all"),
    "api_bank": ("all", "level-1", "level-2"),
    "bamboogle": ("test", "heldout"),
    "alfworld": ("valid_seen", "valid_unseen"),
    "travelplanner": ("validation",),
}
"""Benchmarks a run may evaluate and their splits (the contract's copy of each evaluator's ``splits``, kept equal
by tests/unit/foundation/test_run_config.py: contracts do not import the evaluators)."""

DOMAIN_HELDOUT_PREFIX = "domain:"
"""``domain:NAME`` in ``eval_benchmarks`` evaluates on domain NAME's own eval rows (a data-defined domain's held-out
rows, say): any domain, so only its form is checked here; whether NAME exists is checked where the config is
stored, as for ``domain``."""


def heldout_domain(benchmark: str) -> str | None:
    """The domain named by a well-formed ``domain:NAME``, or None (a benchmark name, or a malformed one)."""
    name = benchmark.removeprefix(DOMAIN_HELDOUT_PREFIX)
    return name if name != benchmark and re.match(DOMAIN_NAME_PATTERN, name) else None


class SeedSampling(enum.StrEnum):
    """How an epoch's seeds are drawn from the domain's training split."""

    UNIFORM = "uniform"
    STRATIFIED = "stratified"
    LEARNING_PROGRESS = "learning_progress"


class GrpoBudget(enum.StrEnum):
    """What fills the agent's GRPO budget (agent.batch_size × agent.max_steps_per_epoch sequences)."""

    TASKS = "tasks"
    INFORMATIVE = "informative"


class RunStatus(enum.StrEnum):
    """Run lifecycle: created → running ⇄ paused → completed | failed | cancelled."""

    CREATED = "created"
    RUNNING = "running"
    PAUSED = "paused"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class CurriculumConfig(WriteModel):
    """α-Curriculum Reward and simulator-update weighting (METHOD.md, Eq. 3 and RWR)."""

    alpha: float = Field(default=0.5, gt=0.0, lt=1.0, description="Target success rate α; the reward peaks here.")
    beta: float = Field(
        default=20.0,
        gt=0.0,
        le=1e6,
        description="Sharpness β of R_env = exp(-β(p̂-α)²). Paper leaves it open (released config 2.0, unused); "
        "20 makes weights differ inside the band.",
    )
    k_min: float = Field(
        default=0.1, ge=0.0, le=0.5, description="Band half-width: seed batches with |p̂-α| > k_min are not trained on."
    )
    rwr_lambda: float = Field(
        default=1.0, ge=0.0, le=100.0, description="RWR temperature λ: weight ∝ exp(λ·R_env)."
    )
    success_threshold: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        description="R_agent at or above which an attempt counts as a success. Default: the domain's "
        "(1.0 for structured actions, 0.5 for free text).",
    )
    use_beta_prior: bool = Field(
        default=False, description="Score seed batches with the Beta(1,1) posterior mean (k+1)/(n+2) instead of k/n."
    )
    replay_ratio: float = Field(
        default=0.25,
        ge=0.0,
        le=0.9,
        description="Most of the agent's training sequences that may be replayed valid traces of earlier epochs "
        "(the agent pool, paper Algorithm 1); a ceiling, never filled beyond ratio/(1-ratio) × the fresh ones. "
        "0 turns replay off.",
    )
    stats_window_epochs: int = Field(
        default=2,
        ge=1,
        le=1000,
        description="The simulator's prompt carries the agent's success counts over this many most recent epochs "
        "(per seed when the seed has them, else per the domain's difficulty group, else the whole run).",
    )
    prompt_stats: bool = Field(
        default=True,
        description="Show the simulator the agent's recent success counts and a difficulty hint (EASIER / similar "
        "/ HARDER) in its prompt from epoch 1 on. false: every prompt asks for a similar difficulty, so only "
        "training can steer the simulator (a design control: a small simulator may follow the hint the wrong way).",
    )


class LearningProgressConfig(WriteModel):
    """Seed sampling by learning progress (``seed_sampling: learning_progress``; genenv.curriculum.learning_progress:
    the formula of Syllabus' LearningProgress curriculum, Kanitscheider et al. 2021)."""

    ema_rate: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="Rate a of the fast EMA of a seed's p̂ (fast ← a·p̂ + (1-a)·fast) and of the slow EMA, which "
        "follows the fast one at the same rate (as Syllabus). One observation is one epoch's seed batch (n × G "
        "attempts), not one episode, so the default is higher than Syllabus' per-episode 0.1.",
    )
    reweight_theta: float = Field(
        default=0.1,
        gt=0.0,
        lt=0.5,
        description="θ of the reweighting p(1-θ)/(p + θ(1-2p)) applied to both EMAs before |fast - slow| "
        "(Kanitscheider et al.: it stretches differences near p = 0 and 1).",
    )
    floor: float = Field(
        default=0.25,
        gt=0.0,
        le=1.0,
        description="Share of the sampling mass spread uniformly over the whole training split, so every seed stays "
        "reachable; the rest goes by learning progress over the seeds drawn before (about floor × seeds_per_epoch "
        "new seeds an epoch).",
    )


class LoraConfig(WriteModel):
    """PEFT LoRA adapter shape, shared by agent and simulator."""

    rank: int = Field(default=16, ge=1, le=256, description="LoRA rank r; must not exceed the vLLM --max-lora-rank.")
    alpha: float = Field(default=32.0, gt=0.0, description="LoRA scaling α (effective scale α/r).")
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="LoRA dropout.")
    target_modules: list[Identifier] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        min_length=1,
        max_length=64,
        description="Module names to adapt (Llama/Qwen naming).",
    )


class AgentTrainConfig(WriteModel):
    """GRPO settings for the agent."""

    train: bool = Field(
        default=True,
        description="Update the agent by GRPO each epoch. false freezes it: no train_agent job and no agent "
        "adapter; rollouts are still made and recorded by the base model (isolates the simulator's side).",
    )
    budget: GrpoBudget = Field(
        default=GrpoBudget.TASKS,
        strict=False,
        description="What fills the batch_size × max_steps_per_epoch sequences of an epoch. tasks: randomly drawn "
        "task groups, those without reward variance included; they take budget and contribute no gradient (the "
        "paper's and verl's batch of tasks, so a curriculum that puts more tasks near p = ½ gives more signal per "
        "step). informative: only groups with reward variance (DAPO-style dynamic sampling), which gives every "
        "curriculum the same number of informative sequences.",
    )

    learning_rate: float = Field(
        default=1e-4, gt=0.0, lt=1.0, description="AdamW LR (paper 1e-6 full-scale; ≈1e-4 for LoRA on the CPU model)."
    )
    batch_size: int = Field(default=16, ge=1, le=65536, description="Sequences per optimiser step (paper 64).")
    micro_batch_size: int = Field(default=8, ge=1, description="Sequences per forward pass; gradients accumulate.")
    max_steps_per_epoch: int = Field(
        default=4, ge=1, le=100_000,
        description="Bound on optimiser steps per epoch; below it, one pass over the epoch's sequences "
        "(fresh + replayed) in batches of batch_size.",
    )
    clip_ratio: float = Field(default=0.2, gt=0.0, lt=1.0, description="PPO/GRPO clip ε on the importance ratio.")
    kl_coef: float = Field(
        default=0.001, ge=0.0, le=100.0, description="KL-loss weight to the reference (adapter disabled)."
    )
    max_seq_len: int = Field(default=512, ge=32, le=131072, description="Prompt+response tokens kept for training.")
    max_grad_norm: float = Field(default=1.0, gt=0.0, description="Clip the gradient norm of each step to this.")


class SimulatorTrainConfig(WriteModel):
    """Reward-weighted regression settings for the simulator."""

    learning_rate: float = Field(default=1e-4, gt=0.0, lt=1.0, description="AdamW LR (paper 5e-7 full-scale).")
    batch_size: int = Field(default=16, ge=1, le=65536, description="Generations per optimiser step (paper 64).")
    micro_batch_size: int = Field(default=8, ge=1, description="Sequences per forward pass; gradients accumulate.")
    max_steps_per_epoch: int = Field(
        default=4, ge=1, le=100_000,
        description="Bound on optimiser steps per epoch; below it, one pass over the pool D_env in batches of "
        "batch_size.",
    )
    passes_per_epoch: int = Field(
        default=1, ge=1, le=1000,
        description="Passes over the pool D_env per epoch, each reshuffled; max_steps_per_epoch still bounds the "
        "steps. Raise it with max_steps_per_epoch to give every epoch a fixed dose of steps when the pool is small "
        "(the calibrated dose of docs/method.md).",
    )
    pool_max_size: int = Field(
        default=512, ge=1, le=1_000_000,
        description="Most generations kept in the simulator pool D_env (the newest are kept).",
    )
    pool_recent_epochs: int = Field(
        default=0, ge=0, le=1000,
        description="Only the in-band generations of this many most recent epochs enter D_env (0 = all epochs).",
    )
    kl_coef: float = Field(
        default=0.05, ge=0.0, le=100.0, description="KL weight to the initial simulator (adapter disabled)."
    )
    kl_cap: float = Field(
        default=0.5, gt=0.0,
        description="Per-epoch trust region: the epoch's update stops once the sampled KL to the simulator it "
        "started from (the previous version) exceeds this; the next epoch starts afresh from the new version.",
    )
    max_seq_len: int = Field(
        default=512, ge=32, le=131072, description="Conditioning prompt + generation tokens kept."
    )
    max_grad_norm: float = Field(default=1.0, gt=0.0, description="Clip the gradient norm of each step to this.")
    reject_repeats: bool = Field(
        default=False,
        description="Reject a generation that repeats, word for word (the domain's canonical form, whitespace "
        "normalised), a valid task of an earlier epoch of the same run, with rejection reason `repeat`. Off by "
        "default: a trained simulator may write again the tasks it was rewarded for; turn it on to get only new "
        "tasks. Applies in every mode that generates.",
    )


class RunConfig(WriteModel):
    """Everything a co-evolution run needs. Every field has a default sized for the CPU quickstart."""

    name: str = Field(default="run", min_length=1, max_length=200, description="Human-readable label.")
    mode: ModeName = Field(
        default=DEFAULT_MODE,
        description=f"The method or a baseline, one of the run-mode table (genenv.contracts.modes, GET /v1/modes): "
        f"{' | '.join(MODES)}.",
        json_schema_extra={"enum": list(MODES)},
    )
    domain: str = Field(
        default="arithmetic", min_length=1, max_length=64,
        description="The task domain, by any registered name: a built-in, a plug-in (entry point genenv.domains) or "
        "a data-defined domain (genenv domains add); `genenv domains list` shows them. A name that is none of these "
        "is refused when the run is created (404 unknown_domain).",
    )
    base_model: ModelName = Field(
        default="smollm2-135m-instruct",
        description="Base model both roles start from: a folder name under paths.model_cache, a hub id (org/name) "
        "or the folder's absolute path (no relative paths, no '..'). Starting the run checks that the model "
        "servers serve this model (409 otherwise).",
    )
    epochs: int = Field(default=3, ge=1, le=1000, description="Co-evolution epochs (paper: 6 in the figures).")
    seeds_per_epoch: int = Field(
        default=8, ge=1, le=4096, description="Seeds drawn from the domain's training split each epoch."
    )
    variations_per_seed: int = Field(
        default=4, ge=1, le=64, description="n: tasks the simulator writes per seed (paper code: 4)."
    )
    seed_sampling: SeedSampling = Field(
        default=SeedSampling.UNIFORM,
        strict=False,
        description="uniform: seeds drawn uniformly from the de-duplicated training split. stratified: equally "
        "many from each of the domain's difficulty groups (its group_field: arithmetic level, BFCL category, ...), "
        "so that a split whose groups differ in size does not decide the difficulty mix. learning_progress: "
        "drawn with priority from the change of their p̂ over the run's earlier epochs (see learning_progress); "
        "not with static_augmentation, which writes every epoch's tasks before any p̂ exists.",
    )
    learning_progress: LearningProgressConfig = Field(
        default_factory=LearningProgressConfig,
        description="Settings of seed_sampling: learning_progress (read only with it).",
    )
    rollouts_per_task: int = Field(default=8, ge=2, le=64, description="G: agent attempts per task (GRPO group).")
    rollout_temperature: float = Field(
        default=0.7, ge=0.0, le=2.0, description="Agent sampling temperature for rollouts (paper 1.0; 0.7 on CPU)."
    )
    simulator_temperature: float = Field(default=1.0, ge=0.0, le=2.0, description="Simulator sampling temperature.")
    max_response_tokens: int = Field(default=64, ge=1, le=16384, description="Agent max new tokens per attempt.")
    max_task_tokens: int = Field(default=256, ge=16, le=16384, description="Simulator max new tokens per task.")
    static_variations: int = Field(
        default=5, ge=1, le=64, description="Variations per seed generated once in static_augmentation mode."
    )
    eval_every: int = Field(default=0, ge=0, le=1000, description="Evaluate benchmarks every k epochs (0 = never).")
    eval_benchmarks: list[str] = Field(
        default_factory=list,
        max_length=6,
        description="Benchmark names evaluated at EVALUATE, or domain:NAME for domain NAME's own eval rows (a "
        "data-defined domain's held-out rows). An experiment's report takes the first as its held-out accuracy.",
    )
    eval_limit: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Items per benchmark at EVALUATE (None = all)."
    )
    eval_splits: dict[str, SplitName] = Field(
        default_factory=dict,
        max_length=6,
        description="Split per benchmark at EVALUATE (e.g. {bfcl: ast}); a benchmark not named uses its default split.",
    )
    random_seed: int = Field(
        default=0,
        ge=0,
        le=2**32 - 1,
        description="Seed for seed sampling, local-backend generation and training (torch seeds are 64-bit; the "
        "trainer derives one per epoch and role from this).",
    )
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)
    lora: LoraConfig = Field(default_factory=LoraConfig)
    agent: AgentTrainConfig = Field(default_factory=AgentTrainConfig)
    simulator: SimulatorTrainConfig = Field(default_factory=SimulatorTrainConfig)
    external: ExternalConfig = Field(
        default_factory=ExternalConfig,
        description="The outside agent's protocol (mode external_agent only: leases, attempts, the epoch deadline).",
    )

    @field_validator("domain")
    @classmethod
    def _well_formed_domain(cls, v: str) -> str:
        # Only the form is checked here: which domains exist is the registry's and the database's to say (the
        # contracts sit below the domain plug-ins), so an unknown name is a 404 where the config is stored.
        if not re.match(DOMAIN_NAME_PATTERN, v):
            raise ValueError(f"domain {v!r} is not a domain name (lower-case letters, digits and _, 2-48 "
                             "characters); `genenv domains list` shows the domains")
        return v

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, v: str) -> str:
        if v not in modes.MODES:  # looked up now: the table, not a copy taken at import
            raise ValueError(f"unknown mode {v!r}; choose from {' | '.join(modes.MODES)}")
        return v

    @field_validator("eval_benchmarks")
    @classmethod
    def _known_benchmarks(cls, v: list[str]) -> list[str]:
        unknown = sorted(name for name in set(v) - set(BENCHMARK_SPLITS) if heldout_domain(name) is None)
        if unknown:
            raise ValueError(f"unknown benchmark(s) {unknown}; choose from {sorted(BENCHMARK_SPLITS)} or "
                             f"{DOMAIN_HELDOUT_PREFIX}NAME (domain NAME's eval rows)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        for name, block in (("agent", self.agent), ("simulator", self.simulator)):
            if block.micro_batch_size > block.batch_size:
                raise ValueError(
                    f"{name}.micro_batch_size ({block.micro_batch_size}) exceeds {name}.batch_size "
                    f"({block.batch_size}); lower micro_batch_size or raise batch_size"
                )
        mode = self.policy
        if not mode.uses_simulator and not self.agent.train:
            raise ValueError(f"{mode.name} with agent.train = false trains nothing; set agent.train = true or choose "
                             "a mode with a simulator")
        if self.seed_sampling is SeedSampling.LEARNING_PROGRESS and mode.tasks is TaskSource.ONCE:
            raise ValueError(f"seed_sampling learning_progress needs p̂ of earlier epochs, and {mode.name} "
                             "draws every epoch's seeds at epoch 0; choose uniform or stratified")
        _check_agent_side(self)
        if self.eval_every and not self.eval_benchmarks:
            raise ValueError("eval_every > 0 needs eval_benchmarks; list at least one benchmark or set eval_every=0")
        for name, split in self.eval_splits.items():
            if name not in self.eval_benchmarks:
                raise ValueError(f"eval_splits names {name!r}, which is not in eval_benchmarks {self.eval_benchmarks}")
            splits = BENCHMARK_SPLITS.get(name, ("eval",))  # a domain's held-out rows are its eval split
            if split not in splits:
                raise ValueError(f"{name} has no split {split!r}; choose from {list(splits)}")
        return self

    @property
    def policy(self) -> ModePolicy:
        """The run mode's row of the mode table."""
        return modes.policy(self.mode)

    @property
    def trains_agent(self) -> bool:
        """Whether our trainer updates the agent: agent.train, and never an outside agent (its owner trains it)."""
        return self.agent.train and not self.policy.external_agent

    @property
    def trains_simulator(self) -> bool:
        """Whether the mode trains the simulator (genenv on the band; generic_rwr on a size-matched selection)."""
        return self.policy.trains_simulator

    @property
    def uses_simulator(self) -> bool:
        """Whether a simulator writes the tasks (agent_only trains on the seeds themselves)."""
        return self.policy.uses_simulator


EXTERNAL_AGENT_IGNORES: tuple[str, ...] = (
    "agent", "rollout_temperature", "max_response_tokens", "eval_every", "eval_benchmarks", "eval_limit",
    "eval_splits", "curriculum.replay_ratio",
)
"""Settings of our agent, which a run with an outside agent cannot apply: setting one is refused at create, so a
config never says what the run does not do (the agent samples, trains and is evaluated by its owner)."""


def _changed(config: RunConfig, dotted: str) -> list[str]:
    """The dotted names under ``dotted`` whose value differs from the field's default (a block: each of its fields)."""
    *parents, name = dotted.split(".")
    model: Any = config
    for part in parents:
        model = getattr(model, part)
    value = getattr(model, name)
    default = type(model).model_fields[name].get_default(call_default_factory=True)
    if isinstance(value, BaseModel) and isinstance(default, BaseModel):
        return [f"{dotted}.{f}" for f in type(value).model_fields if getattr(value, f) != getattr(default, f)]
    return [dotted] if value != default else []


def _check_agent_side(config: RunConfig) -> None:
    """ValueError naming each setting that the run's mode cannot apply: our agent's in external_agent, the
    external block elsewhere. Compared with the defaults, not with what was sent, so a stored config re-validates."""
    if config.policy.external_agent:
        changed = [name for field in EXTERNAL_AGENT_IGNORES for name in _changed(config, field)]
        if changed:
            raise ValueError(f"{config.mode} has an outside agent, which we neither sample, train nor evaluate: "
                             f"{', '.join('config.' + c for c in changed)} cannot apply; leave "
                             f"{'it' if len(changed) == 1 else 'them'} at the default")
    elif changed := _changed(config, "external"):
        raise ValueError(f"{', '.join('config.' + c for c in changed)} applies only to a mode with an outside agent "
                         "(external_agent); leave it at the default")


class RunCreate(WriteModel):
    """Body of POST /v1/runs."""

    config: RunConfig = Field(default_factory=RunConfig)


class WaitingOn(ReadModel):
    """A dependency the run waits for: it did not answer at the run's last try (an outage, never a failure)."""

    dependency: str = Field(
        description="What does not answer: simulator, verifier, curriculum, control_plane, agent_model, "
        "simulator_model or model (the vLLM server of a role, or of both), database, broker, or host:port."
    )
    since: datetime = Field(description="UTC time of the first failed try of this outage.")
    last_error: str = Field(description="The last try's error, on one line.")
    attempts: int = Field(ge=1, description="Tries that found the dependency away in this outage.")
    epoch: int = Field(ge=0, description="The epoch whose phase waits.")
    phase: str = Field(description="The phase that waits (tried again with backoff up to 60 s).")


class Run(ReadModel):
    """A run as the control plane reports it."""

    id: str
    name: str
    status: RunStatus
    config: RunConfig
    current_epoch: int
    error: str | None = None
    waiting_on: WaitingOn | None = Field(
        default=None, description="Set while the run waits for a dependency that does not answer; null otherwise."
    )
    created_at: datetime
    updated_at: datetime


RunAction = Literal["start", "pause", "resume", "cancel"]
