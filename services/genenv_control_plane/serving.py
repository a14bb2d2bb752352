"""Start-time check that the model servers serve the base model a run trains its adapters on.

Only the trainer reads ``config.base_model``; the servers load whatever their own settings name. An adapter trained
on one base and served on another yields garbage without any error, so starting such a run is refused (409).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx

from genenv.contracts.adapters import Role
from genenv.contracts.errors import ConflictError
from genenv.inference.factory import vllm_url
from genenv.settings import GenEnvSettings

log = logging.getLogger(__name__)

_TIMEOUT_S = 5.0


class BaseModelMismatchError(ConflictError):
    """The run's base model is not the one its model server serves."""


def same_model(base_model: str, served: str) -> bool:
    """Whether a served model (a folder path, a cache folder name or a hub id) is the run's ``base_model``."""
    served = served.rstrip("/")
    return served == base_model or served.endswith("/" + base_model)


@dataclass
class BaseModelCheck:
    """Compares a run's base_model with what the configured inference backend serves (local: the setting)."""

    settings: GenEnvSettings
    transport: httpx.AsyncBaseTransport | None = None  # tests answer for the vLLM server through a transport

    async def served(self) -> dict[str, str]:
        """Where each serving backend lives → the base model it serves (servers that cannot tell are left out)."""
        inference = self.settings.inference
        if inference.backend == "local":
            return {"the local backend (inference.base_model)": inference.base_model}
        urls = dict.fromkeys(vllm_url(self.settings, role) for role in Role)
        secret = inference.api_key
        key = secret.get_secret_value() if secret is not None else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        out: dict[str, str] = {}
        async with httpx.AsyncClient(headers=headers, timeout=_TIMEOUT_S, transport=self.transport) as client:
            for url in urls:
                served = await self._served_by(client, url.rstrip("/"), inference.served_model_name)
                if served is not None:
                    out[url] = served
        return out

    @staticmethod
    async def _served_by(client: httpx.AsyncClient, url: str, name: str) -> str | None:
        # A server that is down or still loading cannot be asked; the run may start, and its first phase waits for
        # (and reports) the outage. Only a server that answers with another model is a reason to refuse.
        try:
            response = await client.get(f"{url}/v1/models")
            response.raise_for_status()
            models = response.json().get("data", [])
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            log.warning("not checking the base model served at %s: GET /v1/models failed: %s", url, exc)
            return None
        for model in models:
            if isinstance(model, dict) and model.get("id") == name and not model.get("parent"):
                return str(model.get("root") or name)
        log.warning("the model server at %s serves no base model named %r (inference.served_model_name)", url, name)
        return None

    async def check(self, base_model: str) -> None:
        """ConflictError (409) naming both models when a server serves another base model than ``base_model``."""
        for where, served in (await self.served()).items():
            if not same_model(base_model, served):
                raise BaseModelMismatchError(
                    f"the run's base_model is {base_model!r} but {where} serves {served!r}; adapters trained on one "
                    "base model are wrong on another. Create the run with that base_model, or serve its model",
                    param="config.base_model",
                    code="base_model_mismatch",
                )
