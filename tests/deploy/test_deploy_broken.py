"""Deliberately broken copies of k8s/: every kind of mistake the checks exist for must make them fail."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from deploy_policy import REPO, check_all, kubectl, kubernetes_validate, render_overlay

pytestmark = pytest.mark.skipif(kubectl() is None, reason="kubectl is not installed: needed to render overlays")


def edit(path: Path, old: str, new: str) -> None:
    """Replace one occurrence of ``old`` (which must be there) in a file."""
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def remove_gpu_limit(k8s: Path) -> None:
    """The trainer loses its nvidia.com/gpu limit."""
    edit(k8s / "components/gpu/trainer-gpu.yaml", "              nvidia.com/gpu: 1\n", "")


def drop_toleration(k8s: Path) -> None:
    """The vLLM servers lose their GPU toleration."""
    edit(
        k8s / "components/gpu/vllm-gpu.yaml",
        "      tolerations:\n        - key: nvidia.com/gpu\n          operator: Exists\n          effect: NoSchedule\n",
        "",
    )


def hpa_to_missing_deployment(k8s: Path) -> None:
    """The rollout HPA points at a Deployment that does not exist."""
    edit(
        k8s / "base/rollout.yaml", "    kind: Deployment\n    name: rollout", "    kind: Deployment\n    name: rollouts"
    )


def service_selects_nothing(k8s: Path) -> None:
    """A Service selector with a typo."""
    edit(
        k8s / "base/curriculum.yaml",
        "    app.kubernetes.io/component: curriculum\n  ports:",
        "    app.kubernetes.io/component: curiculum\n  ports:",
    )


def unknown_setting(k8s: Path) -> None:
    """A GENENV_* variable that GenEnvSettings does not read."""
    edit(k8s / "base/kustomization.yaml", "GENENV_QUEUE__EAGER=false", "GENENV_QUEUE__EAGERLY=false")


def undocumented_secret(k8s: Path) -> None:
    """A reference to a Secret nobody documented."""
    edit(k8s / "base/migrate-job.yaml", "name: genenv-secrets", "name: my-secrets")


def missing_pvc(k8s: Path) -> None:
    """A volume whose PersistentVolumeClaim does not exist."""
    edit(k8s / "base/trainer.yaml", "claimName: genenv-adapters", "claimName: genenv-adapter")


def missing_configmap(k8s: Path) -> None:
    """An envFrom of a ConfigMap that does not exist."""
    edit(k8s / "base/orchestrator.yaml", "name: genenv-config", "name: genenv-settings")


def latest_image(k8s: Path) -> None:
    """An image on :latest (the base's images: list sets the tags the manifests run)."""
    edit(
        k8s / "base/kustomization.yaml",
        "  - name: genenv/app\n    newTag: 0.1.0",
        "  - name: genenv/app\n    newTag: latest",
    )


def untagged_image(k8s: Path) -> None:
    """An image without a tag."""
    edit(k8s / "components/datastores/redis.yaml", "image: redis:7.4.2-bookworm", "image: redis")


def http_probe_on_worker(k8s: Path) -> None:
    """A Celery worker probed over HTTP (it serves none)."""
    text = (k8s / "base/rollout.yaml").read_text()
    start = text.index("          livenessProbe:")
    end = text.index("          readinessProbe:")
    (k8s / "base/rollout.yaml").write_text(
        text[:start] + "          livenessProbe:\n            httpGet:\n              path: /healthz\n"
        "              port: 8000\n" + text[end:]
    )


def no_readiness_probe(k8s: Path) -> None:
    """An API container without a readiness probe."""
    text = (k8s / "base/simulator.yaml").read_text()
    start = text.index("          readinessProbe:")
    end = text.index("          resources:", start)
    (k8s / "base/simulator.yaml").write_text(text[:start] + text[end:])


def no_memory_limit(k8s: Path) -> None:
    """A container without a memory limit."""
    edit(
        k8s / "base/curriculum.yaml",
        '              cpu: "1"\n              memory: 512Mi\n',
        '              cpu: "1"\n',
    )


def unknown_kind(k8s: Path) -> None:
    """A kind the checks do not know (kubernetes-validate only warns about it)."""
    (k8s / "base/extra.yaml").write_text("apiVersion: v1\nkind: Secrett\nmetadata:\n  name: x\n")
    edit(k8s / "base/kustomization.yaml", "  - namespace.yaml\n", "  - namespace.yaml\n  - extra.yaml\n")


def pdb_missing(k8s: Path) -> None:
    """The control plane loses its PodDisruptionBudget."""
    text = (k8s / "base/control-plane.yaml").read_text()
    (k8s / "base/control-plane.yaml").write_text(text[: text.index("---\n# Voluntary disruptions")])


def adapters_read_write_once(k8s: Path) -> None:
    """The adapter store can no longer be shared across GPU nodes."""
    edit(
        k8s / "base/pvc.yaml",
        "  name: genenv-adapters\nspec:\n  accessModes: [ReadWriteMany]",
        "  name: genenv-adapters\nspec:\n  accessModes: [ReadWriteOnce]",
    )


def network_policies_dropped(k8s: Path) -> None:
    """The base no longer includes its NetworkPolicies: everything may reach everything."""
    edit(k8s / "base/kustomization.yaml", "  - networkpolicy.yaml\n", "")


def verifier_policy_missing(k8s: Path) -> None:
    """The verifier's ingress policy is gone: default-deny cuts the orchestrator off."""
    text = (k8s / "base/networkpolicy.yaml").read_text()
    start = text.index("---\n# Verifier:")
    end = text.index("---\n", start + 4)
    (k8s / "base/networkpolicy.yaml").write_text(text[:start] + text[end:])


def postgres_open_to_all(k8s: Path) -> None:
    """Postgres admits any pod (its ingress rule loses the from list)."""
    text = (k8s / "components/datastores/networkpolicy.yaml").read_text()
    start = text.index("  name: postgres-ingress")
    head, tail = text[:start], text[start:]
    cut = tail.index("    - from:\n")
    end = tail.index("      ports:\n", cut)
    (k8s / "components/datastores/networkpolicy.yaml").write_text(head + tail[:cut] + "    - " + tail[end + 6 :])


def simulator_client_label_dropped(k8s: Path) -> None:
    """The simulator admits the orchestrator only: an in-cluster RL loop that opted in is refused."""
    edit(
        k8s / "base/networkpolicy.yaml",
        '        - podSelector:\n            matchLabels:\n              genenv.io/simulator-client: "true"\n',
        "",
    )


def https_for_every_pod(k8s: Path) -> None:
    """The opt-in HTTPS egress policy loses its label: every pod may reach the internet."""
    edit(
        k8s / "base/networkpolicy.yaml",
        '  podSelector:\n    matchLabels:\n      genenv.io/egress-https: "true"\n',
        "  podSelector: {}\n",
    )


BREAKS: dict[str, tuple[Callable[[Path], None], str]] = {
    "NetworkPolicies dropped": (network_policies_dropped, "NetworkPolicy: no default-deny"),
    "verifier policy missing": (verifier_policy_missing, "orchestrator -> verifier:http is needed but not allowed"),
    "postgres open to all": (postgres_open_to_all, "any-pod -> postgres:postgres is allowed but must be denied"),
    "gpu limit removed": (remove_gpu_limit, "Deployment/trainer: GPU workload without a nvidia.com/gpu limit"),
    "toleration removed": (drop_toleration, "does not tolerate the nvidia.com/gpu taint"),
    "HPA target missing": (hpa_to_missing_deployment, "scaleTargetRef Deployment/rollouts does not exist"),
    "Service selects nothing": (service_selects_nothing, "Service/curriculum: selector"),
    "unknown setting": (unknown_setting, "GENENV_QUEUE__EAGERLY is not a GenEnvSettings field"),
    "undocumented Secret": (undocumented_secret, "Secret 'my-secrets' is not one of the documented"),
    "missing PVC": (missing_pvc, "PVC 'genenv-adapter' does not exist"),
    "missing ConfigMap": (missing_configmap, "ConfigMap 'genenv-settings' does not exist"),
    "latest image": (latest_image, "image 'genenv/app:latest' is not pinned"),
    "untagged image": (untagged_image, "image 'redis' is not pinned"),
    "HTTP probe on a worker": (http_probe_on_worker, "a Celery worker needs exec probes"),
    "no readiness probe": (no_readiness_probe, "Deployment/simulator container simulator: needs both"),
    "no memory limit": (no_memory_limit, "Deployment/curriculum container curriculum: no limits.memory"),
    "unknown kind": (unknown_kind, "unknown kind 'Secrett'"),
    "PDB missing": (pdb_missing, "Deployment/control-plane: API without a PodDisruptionBudget"),
    "adapters RWO": (adapters_read_write_once, "genenv-adapters: must be ReadWriteMany"),
    "simulator client label dropped": (
        simulator_client_label_dropped,
        "a pod labelled genenv.io/simulator-client=true cannot reach simulator:http",
    ),
    "HTTPS for every pod": (https_for_every_pod, "Deployment/rollout may reach HTTPS outside the cluster"),
}


@pytest.fixture
def k8s_copy(tmp_path: Path) -> Path:
    """A scratch copy of k8s/."""
    return Path(shutil.copytree(REPO / "k8s", tmp_path / "k8s"))


def test_the_untouched_copy_passes(k8s_copy: Path, known_env: set[str]) -> None:
    docs = render_overlay(k8s_copy / "overlays" / "gpu")
    assert check_all(docs, "gpu", known_env) == []


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_policy_checks_fail_on_a_broken_manifest(k8s_copy: Path, known_env: set[str], case: str) -> None:
    breaker, expected = BREAKS[case]
    breaker(k8s_copy)
    docs = render_overlay(k8s_copy / "overlays" / "gpu")
    errors = check_all(docs, "gpu", known_env)
    assert any(expected in e for e in errors), f"{case}: expected {expected!r} in {errors}"


def test_kubernetes_validate_fails_on_a_misspelt_field_and_a_wrong_type(k8s_copy: Path) -> None:
    edit(k8s_copy / "base/verifier.yaml", "          readinessProbe:", "          readinesProbe:")
    edit(k8s_copy / "base/trainer.yaml", "  replicas: 1\n", "  replicas: one\n")
    result = kubernetes_validate(yaml.safe_dump_all(render_overlay(k8s_copy / "overlays" / "cpu-dev")))
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "deployment/verifier" in output and "'readinesProbe' was unexpected" in output
    assert "deployment/trainer" in output and "'one' is not of type 'integer'" in output


def test_kustomize_fails_on_a_missing_resource(k8s_copy: Path) -> None:
    edit(k8s_copy / "base/kustomization.yaml", "  - trainer.yaml\n", "  - trainers.yaml\n")
    with pytest.raises(RuntimeError, match="kustomize"):
        render_overlay(k8s_copy / "overlays" / "gpu")
