#!/usr/bin/env python3
"""Write docs/configuration.md from the pydantic models: every run-config field and every GENENV_* setting.

python deploy/scripts/gen_config_reference.py          # rewrite the file
python deploy/scripts/gen_config_reference.py --check  # exit 1 when the file is out of date (tests/docs runs this)
"""

from __future__ import annotations

import enum
import json
import sys
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import annotated_types as at
from generated_file import generator_main  # deploy/scripts/, beside this script
from pydantic import BaseModel, SecretStr, TypeAdapter
from pydantic.fields import FieldInfo

from genenv.contracts import modes
from genenv.contracts.runs import RunConfig
from genenv.domains import domain_names
from genenv.domains.evaluators import benchmark_names
from genenv.settings import GenEnvSettings

TARGET = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
HOME = str(Path.home())


@dataclass(frozen=True)
class Hyper:
    """How a run-config field maps onto the paper (shared/METHOD.md)."""

    symbol: str
    paper: str
    ours: bool = False


# Keyed by dotted RunConfig path; render() fails on a path that no longer exists, so renames cannot go unnoticed.
HYPERPARAMETERS: dict[str, Hyper] = {
    "mode": Hyper("", "the paper's method and the baselines it compares (see Run modes)"),
    "curriculum.alpha": Hyper("α", "0.5 (Eq. 3)"),
    "curriculum.beta": Hyper("β", "not given (released config 2.0, unused); 20 so weights differ in the band", True),
    "curriculum.k_min": Hyper("k_min", "0.1 (band filter)"),
    "curriculum.rwr_lambda": Hyper("λ", "1.0 (RWR weight ∝ exp(λ·R_env))"),
    "variations_per_seed": Hyper("n", "4 (paper's code)"),
    "rollouts_per_task": Hyper("G", "8 (released config); a setting here", True),
    "curriculum.success_threshold": Hyper("", "success = R_agent ≥ threshold (1.0 structured, 0.5 free text)", True),
    "curriculum.use_beta_prior": Hyper("", "Beta(1,1) estimate p̃ = (k+1)/(n+2) as an alternative to k/n", True),
    "curriculum.replay_ratio": Hyper("", "replay share of the agent pool", True),
    "epochs": Hyper("", "6 in the figures (text says 10)"),
    "rollout_temperature": Hyper("T", "1.0 (released config); the default 0.7 suits the CPU model"),
    "static_variations": Hyper("", "5 variations per seed (static-augmentation baseline)"),
    "agent.learning_rate": Hyper("", "1e-6 AdamW (Table 2, full fine-tune)"),
    "agent.batch_size": Hyper("", "64 (Table 2)"),
    "agent.clip_ratio": Hyper("ε", "0.2 (released config)"),
    "agent.kl_coef": Hyper("", "0.001 (released config)"),
    "agent.max_seq_len": Hyper("", "9,000 (Table 2)"),
    "simulator.learning_rate": Hyper("", "5e-7 AdamW (Table 2, full fine-tune)"),
    "simulator.batch_size": Hyper("", "64 (Table 2)"),
    "simulator.kl_coef": Hyper("", "KL to the initial simulator; no value given", True),
    "simulator.kl_cap": Hyper("", "early stop on sampled KL; no value given", True),
    "lora.rank": Hyper("", "LoRA vs full fine-tune not stated; LoRA here", True),
    "lora.alpha": Hyper("", "LoRA vs full fine-tune not stated; LoRA here", True),
    "lora.dropout": Hyper("", "LoRA vs full fine-tune not stated; LoRA here", True),
    "lora.target_modules": Hyper("", "LoRA vs full fine-tune not stated; LoRA here", True),
}

MODES: dict[str, str] = {
    "genenv": "The method. Each epoch the simulator writes n variations per seed (its prompt carries the target "
    "α and the seed's success counts from earlier epochs); the agent is trained by GRPO, the simulator by RWR on "
    "the in-band generations.",
    "random_simulator": "Baseline: as `genenv`, but the simulator is never trained (always the base model).",
    "static_augmentation": "Baseline: in epoch 0 the untrained simulator writes `static_variations` per seed; "
    "every later epoch trains the agent on that same fixed set (epoch 0's seeds).",
    "agent_only": "Baseline: no simulator; the agent is trained by GRPO on the seed tasks themselves.",
    "generic_rwr": "Control for \"any fine-tuning on its own samples\": as `genenv`, but each epoch the "
    "simulator is trained (same settings, same dose) on a random selection of its own valid generations, as many per "
    "epoch as the α band selects from that epoch of the same run, each with weight 1.",
}

# Values accepted where the type alone does not say (validated in code).
CHOICES: dict[str, list[str]] = {"eval_benchmarks": [*benchmark_names(), "domain:NAME"]}
# Fields whose listed values are examples, not a closed set: any plug-in or data-defined domain name works too.
OPEN_CHOICES: dict[str, tuple[list[str], str]] = {"domain": (domain_names(), "or a plug-in's or data-defined name")}

CROSS_FIELD_RULES = (
    "`agent.micro_batch_size` ≤ `agent.batch_size`, and the same for `simulator`.",
    "`eval_every` > 0 needs at least one entry in `eval_benchmarks`.",
    "`eval_benchmarks` entries must be benchmark names (listed above) or `domain:NAME` (the eval rows of domain NAME, "
    "which must exist where the config is stored: 404 otherwise).",
    "`lora.rank` must not exceed the vLLM servers' `--max-lora-rank` (16 in `deploy/vllm/launch.sh` and "
    "`genenv serve vllm`); otherwise publishing the adapter fails.",
    "`base_model` must be the model the vLLM servers serve (`GENENV_INFERENCE__BASE_MODEL`): the trainer loads "
    "it by this name or path and the adapters are applied to the served model.",
)

HEADER = """\
# Configuration reference

<!-- Generated by deploy/scripts/gen_config_reference.py from genenv.contracts.runs.RunConfig and
genenv.settings.GenEnvSettings. Do not edit: rerun the script (tests/docs fails while this file is stale). -->

GenEnv has two kinds of configuration:

- **Run config** (`RunConfig`): the method's hyperparameters for one run. Written as YAML or JSON and passed to
  `genenv runs create FILE`, or sent as `{"config": {...}}` in `POST /v1/runs` ([api.md](api.md)). Every field is
  optional (missing fields take the defaults below, sized for the CPU quickstart); unknown fields are rejected.
  The config is stored with the run and does not change afterwards. Copyable examples: [examples/](../examples/).
- **Settings** (`GenEnvSettings`): where a process finds its database, queue, services, models and files. Read
  from `GENENV_*` environment variables by every process; nested blocks are joined with `__`, lists and dicts
  are JSON. `deploy/.env.example` lists the same variables ([deployment.md](deployment.md)).

In the tables, **paper** gives the value in Guo et al. (arXiv 2512.19682, Table 2 and §3) or its released
configuration; **[ours]** marks a choice the paper leaves open, made by this project and kept as a setting.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _is_model(annotation: Any) -> typing.TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def type_name(annotation: Any) -> str:
    """A short, user-facing name of a field type."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return "string"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "string"
    if origin in (typing.Union, types.UnionType):
        members = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(members) + (" or null" if type(None) in args else "")
    if origin is list:
        return f"list of {type_name(args[0])}"
    if origin is dict:
        return f"map {type_name(args[0])} → {type_name(args[1])}"
    names: dict[Any, str] = {
        str: "string", int: "integer", float: "number", bool: "boolean", Path: "path", SecretStr: "secret"
    }
    return names.get(annotation) or str(getattr(annotation, "__name__", annotation))


def _choices(annotation: Any) -> list[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return [str(a) for a in typing.get_args(annotation)]
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [str(m.value) for m in annotation]
    return []


def constraints(field: FieldInfo, path: str = "") -> str:
    """Bounds, lengths and allowed values of a field, e.g. ``> 0, < 1`` or ``one of: a, b``."""
    parts: list[str] = []
    for meta in field.metadata:
        if isinstance(meta, at.Gt):
            parts.append(f"> {meta.gt}")
        elif isinstance(meta, at.Ge):
            parts.append(f"≥ {meta.ge}")
        elif isinstance(meta, at.Lt):
            parts.append(f"< {meta.lt}")
        elif isinstance(meta, at.Le):
            parts.append(f"≤ {meta.le}")
        elif isinstance(meta, at.MinLen):
            parts.append(f"length ≥ {meta.min_length}")
        elif isinstance(meta, at.MaxLen):
            parts.append(f"length ≤ {meta.max_length}")
    choices = CHOICES.get(path) or _choices(field.annotation)
    if choices:
        parts.append("one of: " + ", ".join(_code(c) for c in choices))
    if path in OPEN_CHOICES:
        examples, rest = OPEN_CHOICES[path]
        parts.append("built-in: " + ", ".join(_code(c) for c in examples) + f" {rest}")
    return ", ".join(parts)


def default(field: FieldInfo, *, unset: str = "null") -> str:
    """The default as written in YAML/JSON or an environment variable ("~" = home; ``unset`` for None)."""
    value = field.get_default(call_default_factory=True)
    if value is None or isinstance(value, SecretStr):
        return unset
    dumped = TypeAdapter(Any).dump_python(value, mode="json")
    if isinstance(dumped, bool):
        text = "true" if dumped else "false"
    elif isinstance(dumped, str):
        text = dumped or '""'
    else:
        text = json.dumps(dumped, ensure_ascii=False)
    return text.replace(HOME, "~")


@dataclass(frozen=True)
class Row:
    """One documented field."""

    name: str
    field: FieldInfo
    path: str


def walk(model: type[BaseModel], prefix: str = "", sep: str = ".") -> Iterator[tuple[str, type[BaseModel], Row]]:
    """(block path, block model, row) for every leaf field; nested models are walked depth first."""
    for name, field in model.model_fields.items():
        path = f"{prefix}{sep if prefix else ''}{name}"
        if _is_model(field.annotation):
            yield from walk(field.annotation, path, sep)
        else:
            yield prefix, model, Row(name, field, path)


def run_config_paths() -> list[str]:
    """Dotted path of every leaf field of RunConfig."""
    return [row.path for _, _, row in walk(RunConfig)]


def setting_env_names() -> list[str]:
    """Every GENENV_* variable GenEnvSettings reads."""
    return [_env(row.path) for _, _, row in walk(GenEnvSettings, sep="__")]


def _env(path: str) -> str:
    return "GENENV_" + path.upper()


def _first_line(model: type[BaseModel]) -> str:
    return (model.__doc__ or "").strip().splitlines()[0]


def _method_cell(path: str) -> str:
    hyper = HYPERPARAMETERS.get(path)
    if hyper is None:
        return ""
    symbol = f"**{hyper.symbol}** " if hyper.symbol else ""
    return _cell(f"{symbol}{'[ours] ' if hyper.ours else ''}{hyper.paper}")


def _grouped(model: type[BaseModel], sep: str) -> dict[str, tuple[type[BaseModel], list[Row]]]:
    groups: dict[str, tuple[type[BaseModel], list[Row]]] = {}
    for block, block_model, row in walk(model, sep=sep):
        groups.setdefault(block, (block_model, []))[1].append(row)
    return groups


def _check_hyperparameters(known: set[str]) -> None:
    stale = sorted(set(HYPERPARAMETERS) - known) + sorted(set(CHOICES) - known)
    if stale:
        raise SystemExit(f"gen_config_reference: no RunConfig field {stale}; update HYPERPARAMETERS / CHOICES")


def _summary(defaults: Mapping[str, str]) -> list[str]:
    lines = [
        "\n## The method's hyperparameters\n\n",
        "| symbol | field | default | paper | [ours] |\n|---|---|---|---|---|\n",
    ]
    for path, hyper in HYPERPARAMETERS.items():
        lines.append(
            f"| {hyper.symbol} | `{path}` | `{defaults[path]}` | {_cell(hyper.paper)} | "
            f"{'yes' if hyper.ours else ''} |\n"
        )
    lines.append(
        "\nThe run-config defaults are sized for SmolLM2-135M on a CPU (LoRA learning rates ≈ 1e-4, small batches). "
        "`examples/paper-scale-qwen7b.yaml` carries the paper's values.\n"
    )
    return lines


def render() -> str:
    """The full text of docs/configuration.md."""
    groups = _grouped(RunConfig, ".")
    known = {row.path for _, rows in groups.values() for row in rows}
    _check_hyperparameters(known)
    defaults = {row.path: default(row.field) for _, rows in groups.values() for row in rows}
    lines = [HEADER, *_summary(defaults), "\n## Run config (`RunConfig`)\n"]
    for block, (model, rows) in groups.items():
        lines.append(f"\n### {f'`{block}`' if block else 'Top level'}\n\n{_first_line(model)}\n\n")
        lines.append("| field | type | default | constraints | paper | description |\n|---|---|---|---|---|---|\n")
        for row in rows:
            lines.append(
                f"| `{row.path}` | {type_name(row.field.annotation)} | `{_cell(defaults[row.path])}` | "
                f"{_cell(constraints(row.field, row.path))} | {_method_cell(row.path)} | "
                f"{_cell(row.field.description or '')} |\n"
            )
    lines.append("\n### Run modes\n\n| `mode` | what runs |\n|---|---|\n")
    # A mode without a longer text here is described by its row of the run-mode table.
    lines.extend(f"| `{m.name}` | {_cell(MODES.get(m.name, m.summary))} |\n" for m in modes.MODES.values())
    lines.append("\n### Rules checked across fields\n\n")
    lines.extend(f"- {rule}\n" for rule in CROSS_FIELD_RULES)
    lines.append(
        "\n## Settings (`GENENV_*` environment variables)\n\n"
        'Per process, not per run. A variable not set takes the default shown ("~" is the home directory of the '
        "process).\n"
    )
    for block, (model, rows) in _grouped(GenEnvSettings, "__").items():
        doc = f"{_first_line(model)}\n\n" if block else ""
        lines.append(f"\n### {f'`{block}`' if block else 'Top level'}\n\n{doc}")
        lines.append("| variable | type | default | constraints | description |\n|---|---|---|---|---|\n")
        for row in rows:
            lines.append(
                f"| `{_env(row.path)}` | {type_name(row.field.annotation)} | "
                f"`{_cell(default(row.field, unset='(unset)'))}` | "
                f"{_cell(constraints(row.field))} | {_cell(row.field.description or '')} |\n"
            )
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Write the file, or with --check report whether it is current."""
    return generator_main(
        argv, what="docs/configuration.md from RunConfig and GenEnvSettings",
        target=TARGET, script="deploy/scripts/gen_config_reference.py", render=render,
        summary=f"{len(run_config_paths())} run-config fields, {len(setting_env_names())} settings")


if __name__ == "__main__":
    sys.exit(main())
