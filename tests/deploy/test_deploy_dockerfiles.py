"""Dockerfiles: hadolint clean, plus the project's own key rules (pinned FROM, non-root, health checks)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from deploy_policy import Instruction, check_dockerfile, dockerfiles, parse_dockerfile, read_env_file

NAMES = [p.name for p in dockerfiles()]


def pins(repo: Path) -> dict[str, str]:
    """Build arguments that come from deploy/vllm/versions.env."""
    return read_env_file(repo / "deploy" / "vllm" / "versions.env")


def hadolint(hadolint_bin: Path, repo: Path, dockerfile: Path) -> subprocess.CompletedProcess[str]:
    """hadolint with the project's configuration."""
    config = repo / "deploy" / "docker" / ".hadolint.yaml"
    return subprocess.run(
        [str(hadolint_bin), "--config", str(config), str(dockerfile)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_the_four_images_exist() -> None:
    assert NAMES == ["Dockerfile.app", "Dockerfile.trainer", "Dockerfile.vllm", "Dockerfile.vllm-cpu"]


@pytest.mark.parametrize("name", NAMES)
def test_dockerfile_follows_the_key_rules(repo: Path, name: str) -> None:
    errors = check_dockerfile((repo / "deploy" / "docker" / name).read_text(), pins(repo))
    assert errors == [], "\n".join(errors)


@pytest.mark.parametrize("name", NAMES)
def test_hadolint_is_clean(hadolint_bin: Path, repo: Path, name: str) -> None:
    out = hadolint(hadolint_bin, repo, repo / "deploy" / "docker" / name)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("name", NAMES)
def test_build_context_is_narrowed_by_a_dockerignore(repo: Path, name: str) -> None:
    ignore = (repo / "deploy" / "docker" / f"{name}.dockerignore").read_text().splitlines()
    assert ignore[1] == "**" and "!shared/genenv/**" in ignore


@pytest.mark.parametrize("name", NAMES)
def test_genenv_variables_set_in_images_are_settings(repo: Path, name: str, known_env: set[str]) -> None:
    text = (repo / "deploy" / "docker" / name).read_text()
    used = set(re.findall(r"\b(GENENV_[A-Z0-9_]+)=", text))
    assert used - known_env == set()


def requirement_extras(instructions: list[Instruction]) -> list[str]:
    """The extras a Dockerfile passes to project_requirements.py (the one RUN that lists the dependencies)."""
    found = [re.search(r"project_requirements\.py pyproject\.toml([\w ]*)>", i.args) for i in instructions]
    lists = [m.group(1).split() for m in found if m]
    assert len(lists) == 1, "expected one RUN step listing the dependencies with project_requirements.py"
    return lists[0]


def test_app_image_has_no_torch_and_trainer_image_has_the_train_extra(repo: Path) -> None:
    app = parse_dockerfile((repo / "deploy/docker/Dockerfile.app").read_text())
    trainer = parse_dockerfile((repo / "deploy/docker/Dockerfile.trainer").read_text())
    app_runs = " ".join(i.args for i in app if i.op == "RUN")
    assert requirement_extras(app) == [] and "[train]" not in app_runs
    assert "torch must not be in the app image" in app_runs  # the build fails if a dependency pulls torch in
    assert requirement_extras(trainer) == ["train"]
    assert "TORCH_INDEX_URL" in " ".join(i.args for i in trainer if i.op == "RUN")


@pytest.mark.parametrize("name", ["Dockerfile.app", "Dockerfile.trainer", "Dockerfile.vllm-cpu"])
def test_dependencies_are_installed_before_the_sources_are_copied(repo: Path, name: str) -> None:
    """The layer cache: a source change must not invalidate the layer that installs the dependencies."""
    instructions = parse_dockerfile((repo / "deploy/docker" / name).read_text())
    first, runtime = [n for n, i in enumerate(instructions) if i.op == "FROM"][:2]
    build = instructions[first:runtime]  # the build stage
    deps = next(n for n, i in enumerate(build) if i.op == "RUN" and "project_requirements.py" in i.args)
    sources = next(n for n, i in enumerate(build) if i.op == "COPY" and i.args.startswith(("shared", "services")))
    assert deps < sources
    copied_before = {i.args.split()[0] for i in build[:deps] if i.op == "COPY"}
    assert copied_before <= {"pyproject.toml", "deploy/vllm/versions.env", "deploy/docker/project_requirements.py"}
    assert "-r /tmp/requirements.txt" in build[deps].args
    installs = [i.args for i in build[sources:] if i.op == "RUN" and "pip install" in i.args]
    assert installs and all("pip install --no-cache-dir --no-deps ." in a for a in installs)


@pytest.mark.parametrize("name", ["Dockerfile.app", "Dockerfile.trainer", "Dockerfile.vllm-cpu"])
def test_dockerignore_sends_what_the_dockerfile_copies(repo: Path, name: str) -> None:
    sent = [
        line[1:].removesuffix("/**")
        for line in (repo / "deploy/docker" / f"{name}.dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    instructions = parse_dockerfile((repo / "deploy/docker" / name).read_text())
    sources = [i.args.split()[0] for i in instructions if i.op == "COPY" and not i.args.startswith("--from")]
    sources += re.findall(r"--mount=type=bind,source=([^,\s]+)", " ".join(i.args for i in instructions))
    # A folder counts as sent when the patterns keep it or a part of it (shared -> !shared/genenv/**).
    missing = [s for s in sources if not any(p == s or p.startswith(s + "/") or s.startswith(p + "/") for p in sent)]
    assert missing == []


@pytest.mark.parametrize("name", ["Dockerfile.app", "Dockerfile.trainer", "Dockerfile.vllm-cpu"])
def test_python_images_take_their_base_as_a_build_argument(repo: Path, name: str) -> None:
    instructions = parse_dockerfile((repo / "deploy/docker" / name).read_text())
    assert instructions[0].op == "ARG" and instructions[0].args == "PYTHON_IMAGE=python:3.11.9-slim-bookworm"
    froms = [i.args.split()[0] for i in instructions if i.op == "FROM"]
    assert froms and set(froms) == {"${PYTHON_IMAGE}"}


def test_vllm_images_take_their_pins_from_versions_env(repo: Path) -> None:
    gpu = (repo / "deploy/docker/Dockerfile.vllm").read_text()
    cpu = (repo / "deploy/docker/Dockerfile.vllm-cpu").read_text()
    assert "FROM ${VLLM_GPU_IMAGE}" in gpu
    assert 'ENTRYPOINT ["/opt/genenv/vllm/launch.sh"]' in gpu
    assert ". /tmp/versions.env" in cpu and '"$TORCH_CPU" "$VLLM_CPU"' in cpu


BROKEN = {
    "root user": ("USER 10001:10001", "USER root"),
    # The base is a build argument (scripts/images.sh passes a locally built one); its default must stay pinned.
    "unpinned base": ("ARG PYTHON_IMAGE=python:3.11.9-slim-bookworm", "ARG PYTHON_IMAGE=python"),
    "latest base": ("ARG PYTHON_IMAGE=python:3.11.9-slim-bookworm", "ARG PYTHON_IMAGE=python:latest"),
    "base argument without a default": ("ARG PYTHON_IMAGE=python:3.11.9-slim-bookworm", "ARG PYTHON_IMAGE"),
    "no health check": ("HEALTHCHECK", "# HEALTHCHECK"),
    "ADD of a URL": (
        "COPY deploy/scripts /opt/genenv/scripts",
        "ADD https://example.invalid/tool.tar.gz /opt/tool.tar.gz\nCOPY deploy/scripts /opt/genenv/scripts",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_rules_fail_on_a_broken_dockerfile(repo: Path, case: str) -> None:
    old, new = BROKEN[case]
    text = (repo / "deploy/docker/Dockerfile.app").read_text()
    assert old in text
    broken = text.replace(old, new)
    if case == "no health check":
        broken = re.sub(r"^# HEALTHCHECK.*\n(  CMD.*\n)?", "", broken, flags=re.M)
    assert check_dockerfile(broken, {}) != []


def test_rules_fail_when_the_vllm_pin_is_missing(repo: Path) -> None:
    text = (repo / "deploy/docker/Dockerfile.vllm").read_text()
    assert any("ARG with no value" in e for e in check_dockerfile(text, {}))


def test_hadolint_fails_on_a_broken_dockerfile(hadolint_bin: Path, repo: Path, tmp_path: Path) -> None:
    text = (repo / "deploy/docker/Dockerfile.app").read_text()
    broken = tmp_path / "Dockerfile"
    broken.write_text(
        text.replace("FROM ${PYTHON_IMAGE} AS build", "FROM python:latest AS build").replace(
            "USER 10001:10001", "USER root"
        )
    )
    out = hadolint(hadolint_bin, repo, broken)
    assert out.returncode != 0
    assert "DL3007" in out.stdout and "DL3002" in out.stdout
