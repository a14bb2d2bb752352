#!/usr/bin/env python3
"""Write deploy/.env.example from genenv.settings.GenEnvSettings: every setting, its help text and default.

python deploy/scripts/gen_env_example.py          # rewrite the file
python deploy/scripts/gen_env_example.py --check  # exit 1 when the file is out of date (tests/deploy runs this)
"""

from __future__ import annotations

import json
import sys
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from generated_file import generator_main  # deploy/scripts/, beside this script
from pydantic import BaseModel, SecretStr, TypeAdapter
from pydantic.fields import FieldInfo

from genenv.settings import GenEnvSettings

TARGET = Path(__file__).resolve().parents[1] / ".env.example"
HOME = str(Path.home())

HEADER = """\
# Every GenEnv setting, generated from genenv.settings.GenEnvSettings by deploy/scripts/gen_env_example.py.
# Do not edit by hand: rerun the script (tests/deploy fails while this file is out of date).
#
# Variables are GENENV_<BLOCK>__<FIELD> (nested with a double underscore); lists are JSON.
# Each line shows the default, commented out: uncomment and change only what you need.
# "~" in a default stands for the home directory of the process.
# docker compose: copy to deploy/.env (read by every GenEnv service; docker-compose.yml sets the wiring
# variables itself — database, redis, service URLs, paths). Kubernetes: non-secret values go in the
# genenv-config ConfigMap (k8s/base/kustomization.yaml), secrets in the genenv-secrets Secret (docs/deployment.md).
"""


@dataclass(frozen=True)
class Setting:
    """One leaf setting as an environment variable."""

    env: str
    description: str
    type_name: str
    default: str


def _is_block(annotation: Any) -> typing.TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _type_name(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(annotation))
    text = str(annotation) if typing.get_origin(annotation) else getattr(annotation, "__name__", str(annotation))
    return text.replace("typing.", "").replace("pydantic.types.", "").replace("pathlib.", "")


def _render_default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    if value is None or isinstance(value, SecretStr):
        return ""
    dumped = TypeAdapter(Any).dump_python(value, mode="json")
    if isinstance(dumped, bool):
        text = "true" if dumped else "false"
    elif isinstance(dumped, str):
        text = dumped
    else:
        text = json.dumps(dumped)
    return text.replace(HOME, "~")


def iter_settings(model: type[BaseModel] = GenEnvSettings, prefix: str = "GENENV_") -> Iterator[Setting]:
    """Every leaf field of ``model`` as the environment variable that sets it (nested blocks walked)."""
    for name, field in model.model_fields.items():
        env = f"{prefix}{name.upper()}"
        annotation = field.annotation
        if _is_block(annotation):
            yield from iter_settings(annotation, env + "__")
            continue
        yield Setting(env, field.description or "", _type_name(field.annotation), _render_default(field))


def setting_names() -> set[str]:
    """The set of environment variable names GenEnvSettings reads."""
    return {s.env for s in iter_settings()}


def render() -> str:
    """The full text of .env.example."""
    lines = [HEADER]
    block = ""
    for setting in iter_settings():
        parts = setting.env.removeprefix("GENENV_").split("__")
        current = parts[0] if len(parts) > 1 else "(top level)"
        if current != block:
            block = current
            doc = ""
            field = GenEnvSettings.model_fields.get(block.lower())
            annotation = field.annotation if field is not None else None
            if _is_block(annotation):
                doc = (annotation.__doc__ or "").strip().splitlines()[0]
            lines.append(f"\n# ===== {block.lower()}{': ' + doc if doc else ''}\n")
        lines.append(f"# {setting.description} [{setting.type_name}]\n")
        lines.append(f"# {setting.env}={setting.default}\n")
    return "".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Write the file, or with --check report whether it is current."""
    return generator_main(
        argv, what="deploy/.env.example from GenEnvSettings",
        target=TARGET, script="deploy/scripts/gen_env_example.py", render=render,
        summary=f"{sum(1 for _ in iter_settings())} settings")


if __name__ == "__main__":
    sys.exit(main())
