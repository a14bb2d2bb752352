"""docs/configuration.md is generated from RunConfig and GenEnvSettings, complete, and says what the paper sets."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from docs_helpers import DOCS, cells, section
from pydantic import BaseModel, ValidationError

from genenv.contracts.runs import RunConfig
from genenv.domains.evaluators import benchmark_names
from genenv.settings import GenEnvSettings

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "scripts" / "gen_config_reference.py"
CONFIG_DOC = DOCS / "configuration.md"

# The method's hyperparameters by paper symbol, and whether METHOD.md marks them as the project's choice.
SYMBOLS = {
    "α": ("curriculum.alpha", False),
    "β": ("curriculum.beta", True),
    "k_min": ("curriculum.k_min", False),
    "λ": ("curriculum.rwr_lambda", False),
    "n": ("variations_per_seed", False),
    "G": ("rollouts_per_task", True),
}


def _leaves(model: type[BaseModel], prefix: str, sep: str) -> Iterator[str]:
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _leaves(annotation, path + sep, sep)
        else:
            yield path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_configuration_md_is_up_to_date() -> None:
    out = _run("--check")
    assert out.returncode == 0, out.stderr


def test_check_mode_detects_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "configuration.md"
    text = CONFIG_DOC.read_text()
    stale.write_text(text.replace("`curriculum.beta` | number | `20.0`", "`curriculum.beta` | number | `2.0`"))
    out = _run("--check", "--output", str(stale))
    assert out.returncode == 1 and "out of date" in out.stderr


def test_every_run_config_field_has_a_row() -> None:
    text = section(CONFIG_DOC.read_text(), "Run config (`RunConfig`)")
    # Field rows have six cells (field, type, default, constraints, paper, description); the modes table has two.
    rows = {row[0].strip("`") for line in text.splitlines() if len(row := cells(line)) == 6 and row[0].startswith("`")}
    assert rows == set(_leaves(RunConfig, "", "."))


def test_every_setting_has_a_row_as_its_environment_variable() -> None:
    text = section(CONFIG_DOC.read_text(), "Settings (`GENENV_*` environment variables)")
    rows = set(re.findall(r"^\| `(GENENV_[A-Z_]+)` \|", text, re.MULTILINE))
    expected = {"GENENV_" + p.upper() for p in _leaves(GenEnvSettings, "", "__")}
    assert rows == expected


def test_settings_rows_use_names_the_settings_really_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GENENV_INFERENCE__MAX_CONCURRENCY", "7")
    monkeypatch.setenv("GENENV_MAX_BODY_BYTES", "2048")
    settings = GenEnvSettings()
    assert settings.inference.max_concurrency == 7 and settings.max_body_bytes == 2048
    text = CONFIG_DOC.read_text()
    assert "`GENENV_INFERENCE__MAX_CONCURRENCY`" in text and "`GENENV_MAX_BODY_BYTES`" in text


def test_paper_symbols_and_ours_marks() -> None:
    text = section(CONFIG_DOC.read_text(), "The method's hyperparameters")
    rows = {}
    for line in text.splitlines():
        row = cells(line)
        if len(row) == 5 and row[0] in SYMBOLS:
            rows[row[0]] = (row[1].strip("`"), row[4] == "yes")
    assert rows == SYMBOLS


def test_symbols_also_mark_the_field_rows() -> None:
    text = section(CONFIG_DOC.read_text(), "Run config (`RunConfig`)")
    for symbol, (path, ours) in SYMBOLS.items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{path}` |"))
        assert f"**{symbol}**" in row
        assert ("[ours]" in row) is ours, row


def test_documented_cross_field_rules_are_enforced() -> None:
    with pytest.raises(ValidationError, match="micro_batch_size"):
        RunConfig.model_validate({"agent": {"batch_size": 4, "micro_batch_size": 8}})
    with pytest.raises(ValidationError, match="micro_batch_size"):
        RunConfig.model_validate({"simulator": {"batch_size": 4, "micro_batch_size": 8}})
    with pytest.raises(ValidationError, match="eval_benchmarks"):
        RunConfig.model_validate({"eval_every": 1})
    with pytest.raises(ValidationError, match="unknown benchmark"):
        RunConfig.model_validate({"eval_benchmarks": ["mmlu"]})
    with pytest.raises(ValidationError, match="Extra inputs"):
        RunConfig.model_validate({"curriculum": {"alpah": 0.4}})


def test_documented_benchmark_choices_are_accepted() -> None:
    row = next(line for line in CONFIG_DOC.read_text().splitlines() if line.startswith("| `eval_benchmarks` |"))
    documented = re.findall(r"`([a-z_]+)`", cells(row)[3])
    assert documented == benchmark_names()
    assert RunConfig(eval_every=1, eval_benchmarks=documented).eval_benchmarks == documented


def test_domain_is_any_registered_name_not_one_of_the_built_ins() -> None:
    """`domain` takes a plug-in's or a data-defined domain's name too: neither the contract nor the reference may
    read as a closed list of built-ins."""
    description = RunConfig.model_fields["domain"].description or ""
    assert "plug-in" in description and "data-defined" in description
    row = next(line for line in CONFIG_DOC.read_text().splitlines() if line.startswith("| `domain` |"))
    assert "one of:" not in row and "data-defined" in cells(row)[3] and "`arithmetic`" in cells(row)[3]
