"""README.md's commands work as written: the `genenv …` lines that need no model run here (in README order, in an
empty folder with its own GenEnv home), and every option of the others exists in that command's --help."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from docs_helpers import REPO, code_blocks, section, shell_commands
from typer.testing import CliRunner

from genenv.cli.main import app

README = REPO / "README.md"
# Commands (their leading words) that need no model, no running stack and no network: README runs these.
RUNNABLE = (
    ("--help",),
    ("init",),
    ("config", "check"),
    ("domains", "check"),
    ("domains", "add"),
    ("runs", "create"),
)
SEPARATORS = frozenset({"&&", "||", "|", ";"})
TOOL = {"type": "function", "function": {"name": "set_light", "description": "Switch a light", "parameters": {
    "type": "object", "properties": {"room": {"type": "string"}, "on": {"type": "boolean"}},
    "required": ["room", "on"]}}}


def _genenv_commands() -> list[list[str]]:
    """The `genenv` commands of README's "Use it" block, each without its leading `genenv`."""
    commands: list[list[str]] = []
    for block in code_blocks(section(README.read_text(), "Use it"), "bash"):
        for tokens in shell_commands(block):
            current: list[str] = []
            for token in [*tokens, ";"]:
                if token in SEPARATORS:
                    if current[:1] == ["genenv"]:
                        commands.append(current[1:])
                    current = []
                else:
                    current.append(token)
    return commands


def _resolve(args: list[str]) -> tuple[Any, list[str], list[str]]:
    """The command the words name, its path and the remaining words (typer vendors its own click: duck typing)."""
    command: Any = typer.main.get_command(app)
    path: list[str] = []
    rest = list(args)
    while hasattr(command, "get_command") and rest:
        sub = command.get_command(command.context_class(command), rest[0])
        if sub is None:
            break
        path.append(rest.pop(0))
        command = sub
    return command, path, rest


def _options(command: Any) -> set[str]:
    return {opt for p in command.params for opt in [*p.opts, *p.secondary_opts] if opt.startswith("-")} | {"--help"}


COMMANDS = _genenv_commands()


def test_readme_has_the_first_hour_commands() -> None:
    lines = [" ".join(c) for c in COMMANDS]
    assert len(COMMANDS) >= 15
    assert any(line.startswith("runs show RUN_ID --home") for line in lines)
    assert any(line.startswith("init ") for line in lines) and any(line.startswith("config check") for line in lines)
    assert not any("my-tools" in line for line in lines)  # not a valid domain name


@pytest.mark.parametrize("args", COMMANDS, ids=lambda c: " ".join(c)[:60])
def test_every_option_exists_in_the_commands_help(args: list[str]) -> None:
    command, path, rest = _resolve(args)
    options = _options(command)
    used = [word.split("=", 1)[0] for word in rest if word.startswith("-")]
    assert set(used) <= options, f"genenv {' '.join(args)}: unknown {sorted(set(used) - options)}"
    shown = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    for option in used:
        assert option in shown.output, f"{option} not in `genenv {' '.join(path)} --help`"


def test_the_commands_that_need_no_model_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("GENENV_URL", "GENENV_TOKEN", "GENENV_AUTH__TOKENS", "GENENV_SERVICES__CONTROL_PLANE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GENENV_PATHS__HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GENENV_DATABASE__URL", f"sqlite:///{tmp_path / 'home' / 'genenv.db'}")
    (tmp_path / "home").mkdir()
    (tmp_path / "examples").symlink_to(REPO / "examples")
    seeds = [{"tools": [TOOL], "messages": [{"role": "user", "content": f"Light {n} on"}],
              "calls": [{"name": "set_light", "arguments": {"room": f"room{n}", "on": True}}]} for n in range(8)]
    (tmp_path / "my_tools.jsonl").write_text("\n".join(json.dumps(s) for s in seeds) + "\n")
    ran: list[str] = []
    for args in COMMANDS:
        if not any(tuple(args[: len(prefix)]) == prefix for prefix in RUNNABLE):
            continue
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, f"genenv {' '.join(args)}:\n{result.output}"
        ran.append(" ".join(args[:2]))
    assert {"--help", "init --domain", "config check", "domains check", "domains add", "runs create"} <= set(ran)
