"""What the benches share: this checkout's ``genenv`` command, one of its servers started and waited for, a vLLM
adapter loaded, a module of the test tree loaded.

The benches run as ``python bench/<name>.py`` from the repository root in the project's venv, so ``genenv`` and the
services import from the installed distribution and this folder is first on ``sys.path`` (``import _common``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import ModuleType

import httpx

from genenv.inference.launcher import LaunchError, Started, started

ROOT = Path(__file__).resolve().parents[1]


def genenv(*args: str) -> list[str]:
    """The argv of ``genenv <args>`` with this interpreter."""
    return [sys.executable, "-m", "genenv.cli.main", *args]


@contextmanager
def serving(
    args: list[str],
    port: int,
    log: Path | None,
    *,
    path: str = "/readyz",
    timeout_s: float = 600.0,
    poll_s: float = 1.0,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    python: str | Path | None = None,
) -> Iterator[Started]:
    """``genenv <args> --port <port>`` until it stops answering; a server that never becomes healthy ends the
    bench (SystemExit naming its log). ``python``: another environment's interpreter."""
    argv = genenv(*args, "--port", str(port))
    if python is not None:
        argv[0] = str(python)
    try:
        with started(argv, f"http://127.0.0.1:{port}", path=path, timeout_s=timeout_s, poll_s=poll_s, log=log,
                     env=env, cwd=cwd) as server:
            yield server
    except LaunchError as exc:
        raise SystemExit(str(exc)) from exc


def vllm(
    port: int, log: Path, *, model: str | Path | None = None, tree: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> AbstractContextManager[Started]:
    """``genenv serve vllm --role both`` of this checkout (or of the worktree ``tree``) for the ``with`` block;
    ``model`` defaults to the settings' base model."""
    full_env = {**os.environ, **(env or {})}
    if tree is not None:
        full_env["PYTHONPATH"] = f"{tree / 'shared'}{os.pathsep}{tree / 'services'}"
    args = ["serve", "vllm", "--role", "both", *(["--model", str(model)] if model is not None else [])]
    return serving(args, port, log, path="/health", env=full_env, cwd=tree or ROOT)


def load_adapter(url: str, name: str, path: Path) -> None:
    """Load a LoRA adapter into a running vLLM server (one already loaded under ``name`` is fine)."""
    r = httpx.post(f"{url}/v1/load_lora_adapter", json={"lora_name": name, "lora_path": str(path)}, timeout=300)
    if r.status_code >= 400 and "already" not in r.text:
        raise SystemExit(f"cannot load adapter {name}: HTTP {r.status_code} {r.text[:300]}")


def load_file(path: Path) -> ModuleType:
    """The Python file ``path`` as a module named by its stem, registered in sys.modules (a dataclass resolves its
    annotations through it): how a bench uses a helper of the test tree without putting that tree on sys.path."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
