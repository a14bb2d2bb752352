"""Start-up check of a worker: can it call the services it needs with the credentials it has?

A token mismatch would otherwise surface minutes later as a run failed at GENERATE with a 401. A refused
credential is fatal (retrying cannot fix it), so the worker exits with a message naming the setting to fix; a
service that does not answer yet is only reported, since a stack's processes start in any order and every call is
retried by the run.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

import httpx

from genenv.settings import GenEnvSettings

log = logging.getLogger(__name__)

# The services each worker calls (fields of settings.services); the trainer only needs the database.
NEEDS: dict[str, tuple[str, ...]] = {
    "orchestrator": ("simulator", "verifier", "curriculum", "vllm_agent", "vllm_simulator"),
    "rollout": ("vllm_agent",),
    "trainer": (),
}
VLLM = frozenset({"vllm_agent", "vllm_simulator"})


class PreflightError(RuntimeError):
    """A service refused this worker's credentials: the worker cannot do its job until a setting changes."""


@dataclass(frozen=True)
class Probe:
    """The outcome of one service probe: ok, or what is wrong."""

    service: str
    url: str
    ok: bool
    fatal: bool
    detail: str


def _probe(client: httpx.Client, service: str, base: str, token: str | None) -> Probe:
    vllm = service in VLLM
    # Any path but the public probes is behind the bearer check (which runs before routing), so a 401/403 here
    # is exactly what a real call would get; /v1/models and /openapi.json are cheap and always present.
    path = "/v1/models" if vllm else "/openapi.json"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    setting = "GENENV_INFERENCE__API_KEY (the vLLM server's VLLM_API_KEY)" if vllm else (
        "GENENV_AUTH__CLIENT_TOKEN (one of the service's GENENV_AUTH__TOKENS)")
    try:
        response = client.get(base.rstrip("/") + path, headers=headers)
    except httpx.HTTPError as exc:
        return Probe(service, base, False, False, f"not reachable yet ({type(exc).__name__}); calls will be retried")
    if response.status_code == 401:
        why = "refused a call without credentials" if not token else "refused the credentials"
        return Probe(service, base, False, True, f"{why} (401): set {setting}")
    if response.status_code == 403:
        return Probe(service, base, False, True, f"does not accept this worker's token (403): set {setting}")
    return Probe(service, base, True, False, "credentials accepted")


def preflight(settings: GenEnvSettings, worker: str, timeout_s: float = 5.0) -> list[Probe]:
    """Probe every HTTP service ``worker`` calls; log each result; raise PreflightError if any refused us."""
    client_token = settings.auth.client_token.get_secret_value() if settings.auth.client_token else None
    api_key = settings.inference.api_key.get_secret_value() if settings.inference.api_key else None
    targets: dict[str, str] = {}
    for service in NEEDS[worker]:
        url = str(getattr(settings.services, service))
        if not url or url == "inprocess" or (service in VLLM and settings.inference.backend != "vllm"):
            continue  # called in-process (embedded) or not used with this inference backend
        targets[service] = url
    probes: list[Probe] = []
    with httpx.Client(timeout=timeout_s) as client:
        for service, url in targets.items():
            probes.append(_probe(client, service, url, api_key if service in VLLM else client_token))
    for p in probes:
        level = logging.INFO if p.ok else logging.ERROR if p.fatal else logging.WARNING
        log.log(level, "%s worker → %s at %s: %s", worker, p.service, p.url, p.detail)
    fatal = [p for p in probes if p.fatal]
    if fatal:
        lines = "; ".join(f"{p.service} at {p.url} {p.detail}" for p in fatal)
        raise PreflightError(f"the {worker} worker cannot call what it needs: {lines}")
    if not targets:
        log.info("%s worker: no HTTP service to check", worker)
    return probes


def require(settings: GenEnvSettings, worker: str) -> None:
    """Run the preflight at a worker's start; exit with status 2 and the reason when a service refused us."""
    try:
        preflight(settings, worker)
    except PreflightError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
