"""Where a run's ``base_model`` may point: absolute paths only under the configured model roots.

A run config comes from an API client; the trainer (and the operator's servers) load whatever folder it names. An
absolute path outside the folders an operator set aside for models (``/etc``, a mounted secret, another tenant's
adapter store) is refused when the run is created, with a 422 that names the roots, and again by the trainer before
it reads anything (a run stored before the roots were narrowed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from genenv.contracts.errors import GenEnvError
from genenv.settings import PathSettings


class ModelOutsideRootsError(GenEnvError):
    """An absolute base_model path that lies under none of the configured model roots."""

    status_code = 422


def model_roots(paths: PathSettings) -> list[Path]:
    """The folders absolute model paths may lie under: ``paths.model_roots``, else the model cache."""
    return list(paths.model_roots) or [paths.model_cache]


def check_model_location(base_model: str, roots: Sequence[Path], *, param: str = "config.base_model") -> None:
    """ModelOutsideRootsError (422) when ``base_model`` is an absolute path under none of ``roots``.

    Names (a folder under the model cache) and hub ids are not paths and pass. The comparison is lexical: the
    contract's ModelName already refuses '.', '..' and empty segments, so the path is normalised, and a symbolic link
    inside a root is the operator's own choice (attackers cannot create one there).
    """
    if not base_model.startswith("/"):
        return
    path = PurePosixPath(base_model)
    absolute = [PurePosixPath(Path(r).expanduser().absolute()) for r in roots]
    if any(path == root or path.is_relative_to(root) for root in absolute):
        return
    listed = ", ".join(str(r) for r in absolute)
    raise ModelOutsideRootsError(
        f"base_model {base_model[:200]!r} is outside the model roots ({listed}); give a folder name under the model "
        "cache, a hub id 'org/name', or a path under one of those roots (an operator can add roots with "
        "GENENV_PATHS__MODEL_ROOTS)",
        param=param,
        code="base_model_outside_roots",
    )
