"""Every `genenv ...` command line in the compose files, the manifests and the Dockerfiles exists in the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import typer.main
from deploy_policy import OVERLAYS, containers, dockerfiles, parse_dockerfile


def cli_commands() -> dict[tuple[str, ...], set[str]]:
    """Leaf commands of the genenv CLI (as word tuples) -> their option names."""
    from genenv.cli.main import app

    found: dict[tuple[str, ...], set[str]] = {}

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, (*path, name))
        else:
            found[path] = {opt for param in cmd.params for opt in param.opts}

    walk(typer.main.get_command(app), ())
    return found


def genenv_argv(command: list[str]) -> list[str] | None:
    """The `genenv ...` part of a command line (also after wait-for.py's `--`), or None."""
    return command[command.index("genenv") + 1 :] if "genenv" in command else None


def check_argv(argv: list[str], commands: dict[tuple[str, ...], set[str]]) -> str | None:
    """None when ``genenv <argv>`` names a command and only its options, else why not."""
    words = tuple(a for a in argv if not a.startswith("-"))
    for size in range(len(words), 0, -1):
        if words[:size] in commands:
            unknown = [
                a.split("=")[0] for a in argv if a.startswith("--") and a.split("=")[0] not in commands[words[:size]]
            ]
            return f"unknown options {unknown}" if unknown else None
    return "no such command"


def command_lines(repo: Path, compose_bin: Path, rendered: dict[str, list[dict[str, Any]]]) -> dict[str, list[str]]:
    """Every genenv command line in compose (all profiles), the overlays and the Dockerfiles' CMDs."""
    lines: dict[str, list[str]] = {}
    hostnet = ["-f", str(repo / "deploy/compose/hostnet.yml")]
    for profile, override in ((None, []), ("gpu", []), ("cpu", []), ("cpu", hostnet)):
        args = [
            str(compose_bin),
            "-f",
            str(repo / "docker-compose.yml"),
            *override,
            # Placeholder secrets: the compose file refuses to render without them.
            "--env-file",
            str(repo / "tests/deploy/compose-test.env"),
            *(["--profile", profile] if profile else []),
            "config",
            "--format",
            "json",
        ]
        out = subprocess.run(args, cwd=repo, capture_output=True, text=True, check=True, timeout=60)
        for name, svc in json.loads(out.stdout)["services"].items():
            for key in ("command", "entrypoint"):
                argv = genenv_argv(list(svc.get(key) or []))
                if argv is not None:
                    lines[f"compose{' hostnet' if override else ''} {name}.{key}"] = argv
    for overlay in OVERLAYS:
        for c in containers(rendered[overlay]):
            for key in ("command", "args"):
                argv = genenv_argv(list(c.spec.get(key) or []))
                if argv is not None:
                    lines[f"{overlay} {c.where}.{key}"] = argv
    for dockerfile in dockerfiles():
        for ins in parse_dockerfile(dockerfile.read_text()):
            if ins.op in ("CMD", "ENTRYPOINT") and ins.args.startswith("["):
                argv = genenv_argv(json.loads(ins.args))
                if argv is not None:
                    lines[f"{dockerfile.name} {ins.op}"] = argv
    for line in (repo / "deploy/scripts/migrate.sh").read_text().splitlines():
        if line.startswith("exec genenv "):
            lines["migrate.sh exec"] = line.split()[2:]
    return lines


def test_every_genenv_command_line_exists(
    repo: Path, compose_bin: Path, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    commands = cli_commands()
    lines = command_lines(repo, compose_bin, rendered)
    assert len(lines) > 30
    problems = {
        where: f"genenv {' '.join(argv)}: {why}" for where, argv in lines.items() if (why := check_argv(argv, commands))
    }
    assert problems == {}


def test_the_check_rejects_a_wrong_command_or_option() -> None:
    commands = cli_commands()
    assert check_argv(["serve", "verifier", "--host", "0.0.0.0", "--port", "8002"], commands) is None
    assert check_argv(["serve", "verifyer", "--port", "8002"], commands) == "no such command"
    assert check_argv(["worker", "trainer", "--hostnme", "x"], commands) == "unknown options ['--hostnme']"


def test_every_process_of_the_architecture_is_started_somewhere(
    repo: Path, compose_bin: Path, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    wanted = {
        "serve control-plane",
        "serve simulator",
        "serve verifier",
        "serve curriculum",
        "serve vllm",
        "worker orchestrator",
        "worker rollout",
        "worker trainer",
        "db upgrade",
        "models prepare",
    }
    started = {" ".join(argv[:2]) for argv in command_lines(repo, compose_bin, rendered).values()}
    assert wanted - started == set()
