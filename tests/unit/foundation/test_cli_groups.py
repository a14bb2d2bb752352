"""The ``genenv`` command line: a missing optional dependency ends in an install hint (exit 2) wherever a command
imports it, any other missing module keeps its traceback; ``genenv serve``'s table matches the documented ports."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

import genenv.cli.stacks
from genenv.cli.main import app
from genenv.cli.serve import HTTP_SERVICES
from genenv.devstack import documented_ports


def _missing(module: str) -> object:
    def fail(*_: object, **__: object) -> None:
        raise ModuleNotFoundError(f"No module named '{module}'", name=module)

    return fail


@pytest.mark.parametrize(
    ("module", "hint"),
    [
        ("torch", "pip install 'genenv[train]'"),
        ("transformers.models", "pip install 'genenv[train]'"),
        ("vllm", "scripts/setup.sh"),
        ("scipy", "pip install 'genenv[bench]'"),
        ("alfworld", "pip install 'genenv[alfworld]'"),
    ],
)
def test_a_missing_extra_is_a_hint_with_exit_code_2(
    module: str, hint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(genenv.cli.stacks, "prepare_embedded_home", _missing(module))
    result = CliRunner().invoke(app, ["quickstart", "--home", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert f"{module.split('.')[0]} is not installed" in result.output
    assert hint in result.output
    assert "Traceback" not in result.output


def test_an_unrelated_missing_module_is_not_swallowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(genenv.cli.stacks, "prepare_embedded_home", _missing("genenv_nonexistent"))
    result = CliRunner().invoke(app, ["quickstart", "--home", str(tmp_path)])
    assert isinstance(result.exception, ModuleNotFoundError)
    assert result.exception.name == "genenv_nonexistent"
    assert "is not installed" not in result.output


def test_serve_table_factories_import_and_ports_are_the_documented_ones() -> None:
    assert {name: service.port for name, service in HTTP_SERVICES.items()} == documented_ports()
    for service in HTTP_SERVICES.values():
        module, function = service.factory.split(":")
        assert callable(getattr(importlib.import_module(module), function))
