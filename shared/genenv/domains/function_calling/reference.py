"""Load the official ``bfcl-eval`` AST checker and prompt decoder without their heavy import chain.

Used by the agreement test and the speed benchmark only. ``bfcl_eval.eval_checker.ast_eval.ast_checker`` imports
``bfcl_eval.constants.model_config``, which imports every model handler (qwen_agent, anthropic, …); the checker
needs from it only ``MODEL_CONFIG_MAPPING[model].underscore_to_dot``. The decoder lives in
``bfcl_eval.model_handler.utils``, which imports tree-sitter parsers, tenacity and filelock at module level but
needs none of them for Python-syntax decoding. While loading, lightweight stand-ins for exactly those modules
sit in ``sys.modules`` (only where the real module is missing, except model_config which is always stubbed);
afterwards ``sys.modules`` is restored. Everything else the two modules import is bfcl-eval's own stdlib-only
code, so this works with ``pip install --no-deps bfcl-eval==2026.3.23``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

REFERENCE_MODEL_NAME = "genenv-reference"
"""Model name passed to the official checker; its stub config keeps dotted function names as they are."""


@dataclass(frozen=True)
class OfficialBfcl:
    """The official checker entry points."""

    ast_checker: Callable[..., dict[str, Any]]
    decode_ast: Callable[[str], list[dict[str, Any]]]
    language_python: Any
    version: str

    def check(self, functions: list[Any], decoded: list[Any], ground_truth: list[Any], category: str) -> bool:
        """The official verdict on decoded calls (raises what the official checker raises)."""
        result = self.ast_checker(
            functions, decoded, ground_truth, self.language_python, category, REFERENCE_MODEL_NAME
        )
        return bool(result["valid"])

    def check_text(self, functions: list[Any], response: str, ground_truth: list[Any], category: str) -> bool:
        """The official pipeline for a prompting model: decode the text, then relevance or AST check."""
        try:
            decoded = self.decode_ast(response)
            has_call = _is_call_list(decoded) and not (
                len(decoded) == 0 or (len(decoded) == 1 and len(decoded[0]) == 0)
            )
        except Exception:
            if "relevance" in category:
                return "irrelevance" in category
            return False
        if "irrelevance" in category:
            return not has_call
        if "relevance" in category:
            return has_call
        if not _is_call_list(decoded):
            return False
        return self.check(functions, decoded, ground_truth, category)


def _is_call_list(decoded: Any) -> bool:
    """bfcl_eval.utils.is_function_calling_format_output."""
    if type(decoded) is not list:
        return False
    return all(type(item) is dict and len(item) == 1 and type(next(iter(item.values()))) is dict for item in decoded)


class _Config:
    underscore_to_dot = False


class _ModelConfigs(dict[str, _Config]):
    def __missing__(self, key: str) -> _Config:
        return _Config()


def _module(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    return mod


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return True


def _decorator_factory(*_args: Any, **_kwargs: Any) -> Callable[[Any], Any]:
    return lambda fn: fn


@contextmanager
def _stubbed_modules() -> Iterator[None]:
    stubs: dict[str, types.ModuleType] = {
        "bfcl_eval.constants.model_config": _module(
            "bfcl_eval.constants.model_config", MODEL_CONFIG_MAPPING=_ModelConfigs()
        ),
        "bfcl_eval.model_handler.parser.java_parser": _module(
            "bfcl_eval.model_handler.parser.java_parser", parse_java_function_call=None
        ),
        "bfcl_eval.model_handler.parser.js_parser": _module(
            "bfcl_eval.model_handler.parser.js_parser", parse_javascript_function_call=None
        ),
    }
    if _missing("tenacity"):
        stubs["tenacity"] = _module(
            "tenacity",
            retry=_decorator_factory,
            retry_if_exception_message=_decorator_factory,
            retry_if_exception_type=_decorator_factory,
            wait_random_exponential=_decorator_factory,
        )
    if _missing("filelock"):
        stubs["filelock"] = _module("filelock", FileLock=object)
    saved = {name: sys.modules.get(name) for name in stubs}
    sys.modules.update(stubs)
    try:
        yield
    finally:
        for name, previous in saved.items():
            if previous is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = previous


def _load_private(name: str) -> types.ModuleType:
    """Execute a bfcl-eval module under a private name, so the stubbed copy never shadows a real import."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None
    private = importlib.util.spec_from_file_location("_genenv_ref_" + name.replace(".", "_"), spec.origin)
    assert private is not None and private.loader is not None
    module = importlib.util.module_from_spec(private)
    private.loader.exec_module(module)
    return module


_CACHE: list[OfficialBfcl] = []


def load_official() -> OfficialBfcl:
    """The official checker and decoder; raises ImportError when bfcl-eval is not installed."""
    if _CACHE:
        return _CACHE[0]
    if _missing("bfcl_eval"):
        raise ImportError("bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)")
    from importlib.metadata import version

    with _stubbed_modules():
        checker = _load_private("bfcl_eval.eval_checker.ast_eval.ast_checker")
        utils = _load_private("bfcl_eval.model_handler.utils")
        enums = importlib.import_module("bfcl_eval.constants.enums")
    official = OfficialBfcl(
        ast_checker=checker.ast_checker,
        decode_ast=utils.default_decode_ast_prompting,
        language_python=enums.Language.PYTHON,
        version=version("bfcl-eval"),
    )
    _CACHE.append(official)
    return official
