"""Policy and cross-reference checks for the rendered Kubernetes manifests, compose files and Dockerfiles.

Each check takes parsed documents and returns a list of human-readable violations (empty = fine), so the same
functions serve the tests of the real files and the tests that break a copy on purpose.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
OVERLAYS = ("cpu-dev", "gpu", "paper-scale", "one-gpu")
GPU_OVERLAYS = ("gpu", "paper-scale", "one-gpu")
GPU_WORKLOADS = frozenset({"vllm-agent", "vllm-simulator", "trainer"})
# Overlays whose model processes differ from GPU_WORKLOADS: one-gpu serves both roles from vllm-agent.
OVERLAY_GPU_WORKLOADS: dict[str, frozenset[str]] = {"one-gpu": frozenset({"vllm-agent", "trainer"})}
# The label a pod of the namespace carries to call the simulator (the live task generator) from its own RL loop,
# and the one that lets a one-off pod (the data-fetch Job) reach HTTPS.
SIMULATOR_CLIENT_LABEL = ("genenv.io/simulator-client", "true")
EGRESS_HTTPS_LABEL = ("genenv.io/egress-https", "true")
API_DEPLOYMENTS = frozenset({"control-plane", "simulator", "verifier", "curriculum"})
WORKER_DEPLOYMENTS = frozenset({"orchestrator", "rollout", "trainer"})
GPU_RESOURCE = "nvidia.com/gpu"
NAMESPACE = "genenv"

# The Secrets that must be created out of band (docs/deployment.md documents every name and key).
DOCUMENTED_SECRETS: dict[str, frozenset[str]] = {
    "genenv-secrets": frozenset(
        {
            "GENENV_DATABASE__URL",
            "GENENV_REDIS__URL",
            "GENENV_AUTH__TOKENS",
            "GENENV_AUTH__CLIENT_TOKEN",
            "POSTGRES_PASSWORD",
            "REDIS_PASSWORD",
            "VLLM_API_KEY",
            "HF_TOKEN",
        }
    ),
}

# Every kind the manifests may contain, with its apiVersion. Anything else is an error (kubernetes-validate
# only warns about kinds it has no schema for).
KNOWN_KINDS: dict[str, str] = {
    "Namespace": "v1",
    "ServiceAccount": "v1",
    "ConfigMap": "v1",
    "PersistentVolumeClaim": "v1",
    "Service": "v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
    "PodDisruptionBudget": "policy/v1",
    "NetworkPolicy": "networking.k8s.io/v1",
}
CLUSTER_SCOPED = frozenset({"Namespace"})
WORKLOAD_KINDS = frozenset({"Deployment", "Job"})


def settings_env_names() -> set[str]:
    """Every GENENV_* variable GenEnvSettings reads (nested model fields walked, joined with __)."""
    from pydantic import BaseModel

    from genenv.settings import GenEnvSettings

    def walk(model: type[BaseModel], prefix: str) -> Iterator[str]:
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                yield from walk(ann, f"{prefix}{name.upper()}__")
            else:
                yield f"{prefix}{name.upper()}"

    return set(walk(GenEnvSettings, "GENENV_"))


# ---------------------------------------------------------------- rendering


def kubectl() -> str | None:
    """Path of kubectl, or None."""
    return shutil.which("kubectl")


def render_overlay(overlay_dir: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize DIR` parsed into documents."""
    exe = kubectl()
    if exe is None:
        raise RuntimeError("kubectl not found")
    out = subprocess.run([exe, "kustomize", str(overlay_dir)], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {overlay_dir} failed:\n{out.stderr}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def kubernetes_validate(docs_text: str, version: str = "1.32.0") -> subprocess.CompletedProcess[str]:
    """Run `kubernetes-validate --strict -k VERSION -` on rendered YAML."""
    exe = shutil.which("kubernetes-validate") or str(Path(sys.executable).with_name("kubernetes-validate"))
    return subprocess.run(
        [exe, "--strict", "-k", version, "--quiet", "-"], input=docs_text, capture_output=True, text=True, check=False
    )


# ---------------------------------------------------------------- helpers


def _name(doc: dict[str, Any]) -> str:
    return str(doc.get("metadata", {}).get("name", "?"))


def _where(doc: dict[str, Any]) -> str:
    return f"{doc.get('kind')}/{_name(doc)}"


def by_kind(docs: Iterable[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """Documents of one kind keyed by name."""
    return {_name(d): d for d in docs if d.get("kind") == kind}


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a Deployment or Job."""
    return dict(doc["spec"]["template"]["spec"])


def pod_labels(doc: dict[str, Any]) -> dict[str, str]:
    """Labels of the pods a workload creates."""
    return dict(doc["spec"]["template"].get("metadata", {}).get("labels", {}))


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


@dataclass(frozen=True)
class Container:
    """A container with the workload that holds it."""

    workload: dict[str, Any]
    spec: dict[str, Any]
    init: bool

    @property
    def where(self) -> str:
        """Human-readable location."""
        kind = "initContainer" if self.init else "container"
        return f"{_where(self.workload)} {kind} {self.spec.get('name')}"


def containers(docs: Iterable[dict[str, Any]]) -> Iterator[Container]:
    """Every container and init container of every workload."""
    for doc in docs:
        if doc.get("kind") not in WORKLOAD_KINDS:
            continue
        spec = pod_spec(doc)
        for c in spec.get("initContainers", []) or []:
            yield Container(doc, c, True)
        for c in spec.get("containers", []) or []:
            yield Container(doc, c, False)


def services_selecting(docs: list[dict[str, Any]], workload: dict[str, Any]) -> list[dict[str, Any]]:
    """Services whose selector matches the workload's pods."""
    labels = pod_labels(workload)
    return [s for s in by_kind(docs, "Service").values() if _selects(s["spec"].get("selector", {}), labels)]


# ---------------------------------------------------------------- Kubernetes checks


def check_kinds(docs: list[dict[str, Any]]) -> list[str]:
    """Only known kinds with their expected apiVersion; namespaced objects in the genenv namespace."""
    errors = []
    for d in docs:
        kind = d.get("kind")
        if kind not in KNOWN_KINDS:
            errors.append(f"{_where(d)}: unknown kind {kind!r} (known: {', '.join(sorted(KNOWN_KINDS))})")
            continue
        if d.get("apiVersion") != KNOWN_KINDS[kind]:
            errors.append(f"{_where(d)}: apiVersion {d.get('apiVersion')!r}, expected {KNOWN_KINDS[kind]!r}")
        if kind not in CLUSTER_SCOPED and d.get("metadata", {}).get("namespace") != NAMESPACE:
            errors.append(f"{_where(d)}: not in namespace {NAMESPACE}")
    return errors


def check_services(docs: list[dict[str, Any]]) -> list[str]:
    """Every Service selects the pods of exactly one Deployment, and its named target ports exist there."""
    errors = []
    deployments = list(by_kind(docs, "Deployment").values())
    for svc in by_kind(docs, "Service").values():
        selector = svc["spec"].get("selector", {})
        matched = [d for d in deployments if _selects(selector, pod_labels(d))]
        if len(matched) != 1:
            names = [_name(d) for d in matched]
            errors.append(f"{_where(svc)}: selector {selector} matches Deployments {names}, expected exactly one")
            continue
        ports = {p.get("name") for c in pod_spec(matched[0])["containers"] for p in c.get("ports", []) or []}
        numbers = {p.get("containerPort") for c in pod_spec(matched[0])["containers"] for p in c.get("ports", []) or []}
        for port in svc["spec"].get("ports", []):
            target = port.get("targetPort", port.get("port"))
            if (isinstance(target, str) and target not in ports) or (isinstance(target, int) and target not in numbers):
                errors.append(f"{_where(svc)}: targetPort {target!r} is not a port of Deployment/{_name(matched[0])}")
    return errors


def check_hpas(docs: list[dict[str, Any]]) -> list[str]:
    """Every HPA targets an existing Deployment that leaves replicas to it; rollout and verifier have one."""
    errors = []
    deployments = by_kind(docs, "Deployment")
    hpas = by_kind(docs, "HorizontalPodAutoscaler")
    for hpa in hpas.values():
        ref = hpa["spec"]["scaleTargetRef"]
        target = deployments.get(ref.get("name", "")) if ref.get("kind") == "Deployment" else None
        if target is None:
            errors.append(f"{_where(hpa)}: scaleTargetRef {ref.get('kind')}/{ref.get('name')} does not exist")
            continue
        if "replicas" in target["spec"]:
            errors.append(f"{_where(hpa)}: Deployment/{_name(target)} sets replicas; the HPA owns that field")
        if hpa["spec"].get("minReplicas", 1) > hpa["spec"]["maxReplicas"]:
            errors.append(f"{_where(hpa)}: minReplicas > maxReplicas")
    targeted = {h["spec"]["scaleTargetRef"].get("name") for h in hpas.values()}
    for required in ("rollout", "verifier"):
        if required in deployments and required not in targeted:
            errors.append(f"Deployment/{required}: no HorizontalPodAutoscaler")
    return errors


def check_pdbs(docs: list[dict[str, Any]]) -> list[str]:
    """Every PDB selects a Deployment's pods; every API Deployment has one that still allows a drain."""
    errors = []
    deployments = by_kind(docs, "Deployment")
    covered: set[str] = set()
    for pdb in by_kind(docs, "PodDisruptionBudget").values():
        selector = pdb["spec"].get("selector", {}).get("matchLabels", {})
        matched = [n for n, d in deployments.items() if _selects(selector, pod_labels(d))]
        if not matched:
            errors.append(f"{_where(pdb)}: selector {selector} matches no Deployment")
        covered.update(matched)
        min_available = pdb["spec"].get("minAvailable")
        for name in matched:
            replicas = deployments[name]["spec"].get("replicas")
            if isinstance(min_available, int) and replicas is not None and min_available >= replicas:
                errors.append(f"{_where(pdb)}: minAvailable {min_available} >= replicas {replicas} blocks every drain")
    for name in sorted(API_DEPLOYMENTS & set(deployments) - covered):
        errors.append(f"Deployment/{name}: API without a PodDisruptionBudget")
    return errors


def check_references(docs: list[dict[str, Any]]) -> list[str]:
    """ConfigMap, PVC and ServiceAccount references exist; Secret references are the documented ones."""
    errors = []
    configmaps = set(by_kind(docs, "ConfigMap"))
    pvcs = set(by_kind(docs, "PersistentVolumeClaim"))
    accounts = set(by_kind(docs, "ServiceAccount")) | {"default"}

    def secret(where: str, name: str, key: str | None) -> None:
        if name not in DOCUMENTED_SECRETS:
            errors.append(f"{where}: Secret {name!r} is not one of the documented out-of-band Secrets")
        elif key is not None and key not in DOCUMENTED_SECRETS[name]:
            errors.append(f"{where}: key {key!r} of Secret {name!r} is not documented")

    for c in containers(docs):
        for src in c.spec.get("envFrom", []) or []:
            if "configMapRef" in src and src["configMapRef"]["name"] not in configmaps:
                errors.append(f"{c.where}: envFrom ConfigMap {src['configMapRef']['name']!r} does not exist")
            if "secretRef" in src:
                secret(c.where, src["secretRef"]["name"], None)
        for env in c.spec.get("env", []) or []:
            ref = env.get("valueFrom", {})
            if "configMapKeyRef" in ref:
                cm = by_kind(docs, "ConfigMap").get(ref["configMapKeyRef"]["name"])
                if cm is None or ref["configMapKeyRef"]["key"] not in (cm.get("data") or {}):
                    errors.append(f"{c.where}: env {env['name']} refers to a missing ConfigMap key")
            if "secretKeyRef" in ref:
                secret(c.where, ref["secretKeyRef"]["name"], ref["secretKeyRef"]["key"])
    for doc in docs:
        if doc.get("kind") not in WORKLOAD_KINDS:
            continue
        spec = pod_spec(doc)
        if spec.get("serviceAccountName", "default") not in accounts:
            errors.append(f"{_where(doc)}: ServiceAccount {spec['serviceAccountName']!r} does not exist")
        mounted = {
            m["name"]
            for c in spec.get("containers", []) + (spec.get("initContainers") or [])
            for m in c.get("volumeMounts", []) or []
        }
        for vol in spec.get("volumes", []) or []:
            if "persistentVolumeClaim" in vol and vol["persistentVolumeClaim"]["claimName"] not in pvcs:
                errors.append(f"{_where(doc)}: PVC {vol['persistentVolumeClaim']['claimName']!r} does not exist")
            if "configMap" in vol and vol["configMap"]["name"] not in configmaps:
                errors.append(f"{_where(doc)}: ConfigMap volume {vol['configMap']['name']!r} does not exist")
            if "secret" in vol:
                secret(_where(doc), vol["secret"]["secretName"], None)
        declared = {v["name"] for v in spec.get("volumes", []) or []}
        for missing in sorted(mounted - declared):
            errors.append(f"{_where(doc)}: volumeMount {missing!r} has no volume")
    return errors


def _gpu_limit(c: dict[str, Any]) -> Any:
    return (c.get("resources", {}).get("limits") or {}).get(GPU_RESOURCE)


def check_gpu(
    docs: list[dict[str, Any]], gpu_overlay: bool, gpu_workloads: frozenset[str] = GPU_WORKLOADS
) -> list[str]:
    """GPU workloads: a GPU limit, a nodeSelector and a toleration; on CPU overlays no GPU anywhere."""
    errors = []
    deployments = by_kind(docs, "Deployment")
    for doc in docs:
        if doc.get("kind") not in WORKLOAD_KINDS:
            continue
        spec = pod_spec(doc)
        gpus = [_gpu_limit(c) for c in spec["containers"] if _gpu_limit(c) is not None]
        expected = gpu_overlay and doc["kind"] == "Deployment" and _name(doc) in gpu_workloads
        if not gpus:
            if expected:
                errors.append(f"{_where(doc)}: GPU workload without a {GPU_RESOURCE} limit")
            continue
        if not gpu_overlay:
            errors.append(f"{_where(doc)}: requests {GPU_RESOURCE} in a CPU overlay")
        if expected and gpus != [1]:
            errors.append(f"{_where(doc)}: expected exactly one GPU, found limits {gpus}")
        if not spec.get("nodeSelector"):
            errors.append(f"{_where(doc)}: uses {GPU_RESOURCE} but has no nodeSelector")
        tolerations = spec.get("tolerations") or []
        if not any(t.get("key") == GPU_RESOURCE for t in tolerations):
            errors.append(f"{_where(doc)}: uses {GPU_RESOURCE} but does not tolerate the {GPU_RESOURCE} taint")
    for name in sorted(gpu_workloads - set(deployments)):
        errors.append(f"Deployment/{name}: missing")
    return errors


def check_service_urls(docs: list[dict[str, Any]]) -> list[str]:
    """Every GENENV_SERVICES__* URL in the ConfigMap names a Service of the overlay and one of its ports."""
    errors = []
    services = by_kind(docs, "Service")
    for cm in by_kind(docs, "ConfigMap").values():
        for key, value in (cm.get("data") or {}).items():
            match = re.fullmatch(r"https?://([a-z0-9-]+):(\d+)/?", str(value))
            if not key.startswith("GENENV_SERVICES__") or match is None:
                continue
            host, port = match.group(1), int(match.group(2))
            svc = services.get(host)
            if svc is None:
                errors.append(f"{_where(cm)}: {key}={value} names no Service of this overlay")
            elif port not in {p.get("port") for p in svc["spec"].get("ports", [])}:
                errors.append(f"{_where(cm)}: {key}={value}: Service/{host} has no port {port}")
    return errors


def _probe_kind(probe: dict[str, Any] | None) -> str | None:
    if not probe:
        return None
    for kind in ("httpGet", "exec", "tcpSocket", "grpc"):
        if kind in probe:
            return kind
    return "?"


def check_containers(docs: list[dict[str, Any]]) -> list[str]:
    """Every container: pinned image tag, CPU+memory requests and limits; long-running ones: probes."""
    errors = []
    for c in containers(docs):
        image = str(c.spec.get("image", ""))
        name_part, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
        if not tag or tag == "latest" or not name_part:
            errors.append(f"{c.where}: image {image!r} is not pinned to a tag")
        res = c.spec.get("resources") or {}
        for section in ("requests", "limits"):
            for resource in ("cpu", "memory"):
                if resource not in (res.get(section) or {}):
                    errors.append(f"{c.where}: no {section}.{resource}")
        if c.init or c.workload["kind"] != "Deployment":
            continue
        live, ready = _probe_kind(c.spec.get("livenessProbe")), _probe_kind(c.spec.get("readinessProbe"))
        if live is None or ready is None:
            errors.append(f"{c.where}: needs both livenessProbe and readinessProbe")
            continue
        workload = _name(c.workload)
        if workload in WORKER_DEPLOYMENTS:
            if live != "exec" or ready != "exec":
                errors.append(f"{c.where}: a Celery worker needs exec probes (celery_ping.py), has {live}/{ready}")
            command = " ".join(c.spec["livenessProbe"].get("exec", {}).get("command", []))
            if "celery_ping.py" not in command or f"{workload}@%h" not in command:
                errors.append(f"{c.where}: liveness must ping the worker node {workload}@%h")
        if workload in API_DEPLOYMENTS:
            paths = (
                c.spec["livenessProbe"].get("httpGet", {}).get("path"),
                c.spec["readinessProbe"].get("httpGet", {}).get("path"),
            )
            if paths != ("/healthz", "/readyz"):
                errors.append(f"{c.where}: liveness/readiness must be httpGet /healthz and /readyz, found {paths}")
    return errors


def manifest_env_names(docs: list[dict[str, Any]]) -> dict[str, str]:
    """GENENV_* names used by the manifests (env, ConfigMap keys, $(VAR) references) -> where."""
    used: dict[str, str] = {}
    for cm in by_kind(docs, "ConfigMap").values():
        for key in cm.get("data") or {}:
            used.setdefault(key, _where(cm))
    for c in containers(docs):
        for env in c.spec.get("env", []) or []:
            used.setdefault(env["name"], c.where)
        text = json.dumps([c.spec.get("command", []), c.spec.get("args", [])])
        for ref in re.findall(r"\$\((GENENV_[A-Z0-9_]+)\)", text):
            used.setdefault(ref, c.where)
    return {k: v for k, v in used.items() if k.startswith("GENENV_")}


def check_env_names(used: dict[str, str], known: set[str]) -> list[str]:
    """Every GENENV_* variable maps to a GenEnvSettings field."""
    return [
        f"{where}: {name} is not a GenEnvSettings field" for name, where in sorted(used.items()) if name not in known
    ]


def check_storage(docs: list[dict[str, Any]], gpu_overlay: bool) -> list[str]:
    """Adapters: one PVC mounted at GENENV_PATHS__ADAPTER_STORE by the trainer (rw) and every vLLM server."""
    errors = []
    cm = next(iter(by_kind(docs, "ConfigMap").values()), {})
    store = (cm.get("data") or {}).get("GENENV_PATHS__ADAPTER_STORE")
    model = (cm.get("data") or {}).get("GENENV_INFERENCE__BASE_MODEL", "")
    cache = (cm.get("data") or {}).get("GENENV_PATHS__MODEL_CACHE", "")
    if not store:
        errors.append("ConfigMap: GENENV_PATHS__ADAPTER_STORE not set")
    if not (cache and model.startswith(cache.rstrip("/") + "/")):
        errors.append(f"ConfigMap: base model {model!r} is not a folder under the model cache {cache!r}")
    pvc = by_kind(docs, "PersistentVolumeClaim").get("genenv-adapters")
    if pvc is None:
        return [*errors, "PersistentVolumeClaim/genenv-adapters: missing"]
    if gpu_overlay and "ReadWriteMany" not in pvc["spec"].get("accessModes", []):
        errors.append(
            "PersistentVolumeClaim/genenv-adapters: must be ReadWriteMany (trainer and vLLM on different nodes)"
        )
    deployments = by_kind(docs, "Deployment")
    for name in sorted(GPU_WORKLOADS):
        doc = deployments.get(name)
        if doc is None:
            continue
        spec = pod_spec(doc)
        volumes = {
            v["name"]
            for v in spec.get("volumes", []) or []
            if v.get("persistentVolumeClaim", {}).get("claimName") == "genenv-adapters"
        }
        mounts = [m for c in spec["containers"] for m in c.get("volumeMounts", []) or [] if m["name"] in volumes]
        if not mounts or any(m["mountPath"] != store for m in mounts):
            errors.append(f"Deployment/{name}: must mount genenv-adapters at {store}")
        if name == "trainer" and any(m.get("readOnly") for m in mounts):
            errors.append("Deployment/trainer: writes adapters, so genenv-adapters must not be read-only")
    return errors


# (client component, server component, server port name) that the network policies must allow ...
REQUIRED_FLOWS: tuple[tuple[str, str, str], ...] = (
    *((c, "postgres", "postgres") for c in (*API_DEPLOYMENTS, *WORKER_DEPLOYMENTS, "migrate")),
    *((c, "redis", "redis") for c in (*API_DEPLOYMENTS, *WORKER_DEPLOYMENTS)),
    *(
        (c, v, "http")
        for c in ("simulator", "verifier", "orchestrator", "rollout")
        for v in ("vllm-agent", "vllm-simulator")
    ),
    *(("orchestrator", s, "http") for s in ("simulator", "verifier", "curriculum")),
    ("any-pod", "control-plane", "http"),
)
# ... and flows they must deny (an unrelated pod, or a component that has no business there).
FORBIDDEN_FLOWS: tuple[tuple[str, str, str], ...] = (
    *(
        ("any-pod", s, p)
        for s, p in (
            ("postgres", "postgres"),
            ("redis", "redis"),
            ("vllm-agent", "http"),
            ("vllm-simulator", "http"),
            ("simulator", "http"),
            ("verifier", "http"),
            ("curriculum", "http"),
        )
    ),
    ("vllm-agent", "postgres", "postgres"),
    ("migrate", "redis", "redis"),
    ("control-plane", "vllm-agent", "http"),
    ("rollout", "simulator", "http"),
)


def _matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels only; the manifests use no matchExpressions) against pod labels."""
    selector = selector or {}
    if selector.get("matchExpressions"):
        raise ValueError("matchExpressions are not supported by this check")
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer_matches(peer: dict[str, Any], labels: dict[str, str] | None) -> bool:
    """Does a from/to peer admit a pod of this namespace with ``labels`` (None = a client outside the cluster)?"""
    if "ipBlock" in peer:
        return labels is None
    if labels is None:
        return False
    return _matches(peer.get("podSelector"), labels)  # a namespaceSelector {} alone admits every pod too


def _port_matches(rule: dict[str, Any], port: str, number: int | None) -> bool:
    ports = rule.get("ports") or []
    return not ports or any(p.get("port") in (port, number) for p in ports)


def _allowed(
    policies: list[dict[str, Any]],
    direction: str,
    own: dict[str, str],
    other: dict[str, str] | None,
    port: str,
    number: int | None,
) -> bool:
    """NetworkPolicy semantics for one pod and one direction: isolated pods need a rule that admits the peer."""
    peers_key = "from" if direction == "Ingress" else "to"
    applicable = [
        p for p in policies if _matches(p["spec"].get("podSelector"), own) and direction in p["spec"]["policyTypes"]
    ]
    if not applicable:
        return True
    for policy in applicable:
        for rule in policy["spec"].get(direction.lower()) or []:
            peers = rule.get(peers_key)
            if (not peers or any(_peer_matches(peer, other) for peer in peers)) and _port_matches(rule, port, number):
                return True
    return False


def flow_allowed(docs: list[dict[str, Any]], client: str, server: str, port: str) -> bool:
    """Whether a pod of component ``client`` may open ``port`` (a named container port) on ``server``'s pods."""
    workloads = {pod_labels(d).get("app.kubernetes.io/component"): d for d in docs if d.get("kind") in WORKLOAD_KINDS}
    src = pod_labels(workloads[client]) if client in workloads else {"app.kubernetes.io/component": client}
    return flow_allowed_from(docs, src, server, port)


def flow_allowed_from(docs: list[dict[str, Any]], src: dict[str, str], server: str, port: str) -> bool:
    """Whether a pod of this namespace labelled ``src`` may open ``port`` (a named port) on ``server``'s pods."""
    workloads = {pod_labels(d).get("app.kubernetes.io/component"): d for d in docs if d.get("kind") in WORKLOAD_KINDS}
    policies = list(by_kind(docs, "NetworkPolicy").values())
    target = workloads[server]
    number = next(
        (
            p.get("containerPort")
            for c in pod_spec(target)["containers"]
            for p in c.get("ports", []) or []
            if p.get("name") == port
        ),
        None,
    )
    dst = pod_labels(target)
    return _allowed(policies, "Egress", src, dst, port, number) and _allowed(
        policies, "Ingress", dst, src, port, number
    )


def egress_allowed(docs: list[dict[str, Any]], src: dict[str, str], number: int) -> bool:
    """Whether a pod labelled ``src`` may open TCP port ``number`` outside the cluster (e.g. 443 to a hub)."""
    policies = list(by_kind(docs, "NetworkPolicy").values())
    return _allowed(policies, "Egress", src, None, "", number)


def check_network_policies(docs: list[dict[str, Any]]) -> list[str]:
    """Default-deny for the whole namespace, the flows GenEnv needs allowed, and nothing beyond them."""
    errors = []
    policies = by_kind(docs, "NetworkPolicy")
    deny = [
        p
        for p in policies.values()
        if p["spec"].get("podSelector") in ({}, None)
        and set(p["spec"].get("policyTypes", [])) == {"Ingress", "Egress"}
        and not p["spec"].get("ingress")
        and not p["spec"].get("egress")
    ]
    if not deny:
        errors.append("NetworkPolicy: no default-deny (podSelector {} with policyTypes [Ingress, Egress], no rules)")
    components = {pod_labels(d).get("app.kubernetes.io/component") for d in docs if d.get("kind") in WORKLOAD_KINDS}
    for client, server, port in REQUIRED_FLOWS:
        if server in components and (client in components or client == "any-pod"):
            if not flow_allowed(docs, client, server, port):
                errors.append(f"NetworkPolicy: {client} -> {server}:{port} is needed but not allowed")
    for client, server, port in FORBIDDEN_FLOWS:
        if server in components and flow_allowed(docs, client, server, port):
            errors.append(f"NetworkPolicy: {client} -> {server}:{port} is allowed but must be denied")
    # An in-cluster RL loop opts in to the live task generator with a label; the label opens nothing else.
    key, value = SIMULATOR_CLIENT_LABEL
    client = {"app.kubernetes.io/component": "my-rl-loop", key: value}
    if "simulator" in components and not flow_allowed_from(docs, client, "simulator", "http"):
        errors.append(f"NetworkPolicy: a pod labelled {key}={value} cannot reach simulator:http")
    for server in sorted(components & {"verifier", "curriculum", "vllm-agent", "vllm-simulator"}):
        if flow_allowed_from(docs, client, server, "http"):
            errors.append(f"NetworkPolicy: a pod labelled {key}={value} may reach {server}:http")
    # HTTPS out of the cluster: the model download and pods that opt in, no long-running GenEnv process.
    key, value = EGRESS_HTTPS_LABEL
    if not egress_allowed(docs, {"app.kubernetes.io/component": "data-fetch", key: value}, 443):
        errors.append(f"NetworkPolicy: a pod labelled {key}={value} cannot reach HTTPS")
    for name, deployment in sorted(by_kind(docs, "Deployment").items()):
        if egress_allowed(docs, pod_labels(deployment), 443):
            errors.append(f"NetworkPolicy: Deployment/{name} may reach HTTPS outside the cluster")
    return errors


def check_all(docs: list[dict[str, Any]], overlay: str, known_env: set[str]) -> list[str]:
    """All Kubernetes policy checks for one rendered overlay."""
    gpu = overlay in GPU_OVERLAYS
    gpu_workloads = OVERLAY_GPU_WORKLOADS.get(overlay, GPU_WORKLOADS)
    return [
        *check_kinds(docs),
        *check_services(docs),
        *check_hpas(docs),
        *check_pdbs(docs),
        *check_references(docs),
        *check_gpu(docs, gpu, gpu_workloads),
        *check_service_urls(docs),
        *check_containers(docs),
        *check_env_names(manifest_env_names(docs), known_env),
        *check_storage(docs, gpu),
        *check_network_policies(docs),
    ]


# ---------------------------------------------------------------- Dockerfiles


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction (continuation lines joined)."""

    line: int
    op: str
    args: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions of a Dockerfile, comments dropped and continuations joined."""
    out: list[Instruction] = []
    buf, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue
        if not buf:
            start = number
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        op, _, args = buf.partition(" ")
        out.append(Instruction(start, op.upper(), args.strip()))
        buf = ""
    return out


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of an env file."""
    values = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def check_dockerfile(text: str, build_args: dict[str, str], service_image: bool = True) -> list[str]:
    """Key rules: pinned FROM (ARGs resolved), no ADD of URLs, a non-root final USER, a HEALTHCHECK."""
    errors = []
    instructions = parse_dockerfile(text)
    args = dict(build_args)
    stages: set[str] = set()
    user = None
    healthcheck = False
    for ins in instructions:
        if ins.op == "ARG":
            name, _, default = ins.args.partition("=")
            if default and name not in build_args:
                args[name] = default
        elif ins.op == "FROM":
            parts = ins.args.split()
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), "\0"), parts[0])
            if len(parts) >= 3 and parts[1].upper() == "AS":
                stages.add(parts[2])
            if image in stages:
                continue
            last = image.split("/")[-1]
            if "\0" in image:
                errors.append(f"line {ins.line}: FROM {parts[0]} uses an ARG with no value")
            elif ":" not in last or last.endswith(":latest") or "@" in image:
                errors.append(f"line {ins.line}: FROM {parts[0]} is not pinned to a tag")
            user = None  # every stage starts as the base image's user
            healthcheck = False
        elif ins.op == "ADD" and re.search(r"https?://", ins.args):
            errors.append(f"line {ins.line}: ADD of a URL (download in a RUN step with a checksum instead)")
        elif ins.op == "USER":
            user = ins.args.split(":")[0]
        elif ins.op == "HEALTHCHECK":
            healthcheck = not ins.args.upper().startswith("NONE")
    if user is None or user in ("root", "0"):
        errors.append(f"final stage runs as {user or 'the base image user'}: add a non-root USER")
    if service_image and not healthcheck:
        errors.append("final stage has no HEALTHCHECK")
    return errors


def dockerfiles() -> list[Path]:
    """The Dockerfiles of deploy/docker."""
    return sorted(p for p in (REPO / "deploy" / "docker").glob("Dockerfile.*") if not p.name.endswith(".dockerignore"))


# ---------------------------------------------------------------- compose


def compose_services(rendered: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Services of a `docker-compose config --format json` document."""
    return dict(rendered.get("services", {}))


def check_compose(rendered: dict[str, Any], profile: str | None, known_env: set[str]) -> list[str]:
    """Compose policy: pinned images, health checks and health-gated depends_on, settings names, GPUs, adapters."""
    errors = []
    services = compose_services(rendered)
    one_shots = {n for n, s in services.items() if s.get("restart") in (None, "no")}
    for name, svc in services.items():
        image = str(svc.get("image", ""))
        if ":" not in image.split("/")[-1] or image.endswith(":latest"):
            errors.append(f"service {name}: image {image!r} is not pinned to a tag")
        for key in svc.get("environment") or {}:
            if key.startswith("GENENV_") and key not in known_env:
                errors.append(f"service {name}: {key} is not a GenEnvSettings field")
        if name not in one_shots:
            hc = svc.get("healthcheck") or {}
            if not hc.get("test") or hc.get("disable"):
                errors.append(f"service {name}: long-running service without a healthcheck")
        for dep, cond in (svc.get("depends_on") or {}).items():
            wanted = "service_completed_successfully" if dep in one_shots else "service_healthy"
            if cond.get("condition") != wanted:
                errors.append(f"service {name}: depends_on {dep} should wait for {wanted}")
    store = "/var/lib/genenv/adapters"
    model_servers = {n for n in services if n.startswith("vllm-") or n.startswith("trainer")}
    if profile in ("gpu", "cpu") and len(model_servers) != 3:
        errors.append(
            f"profile {profile}: expected vLLM agent, vLLM simulator and trainer, found {sorted(model_servers)}"
        )
    for name in sorted(model_servers):
        svc = services[name]
        mounts = [v for v in svc.get("volumes", []) if v.get("source") == "adapters"]
        if not mounts or any(v.get("target") != store for v in mounts):
            errors.append(f"service {name}: must mount the adapters volume at {store}")
        env_store = (svc.get("environment") or {}).get("GENENV_PATHS__ADAPTER_STORE", store)
        if env_store != store:
            errors.append(f"service {name}: GENENV_PATHS__ADAPTER_STORE={env_store} differs from the mount")
        if profile == "gpu":
            devices = svc.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
            if not any(d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) for d in devices):
                errors.append(f"service {name}: no NVIDIA GPU reservation in profile gpu")
    return [*errors, *check_compose_security(rendered)]


def check_compose_security(rendered: dict[str, Any]) -> list[str]:
    """Secure defaults: loopback-only ports, auth required with tokens, vLLM API key, Redis password."""
    errors = []
    services = compose_services(rendered)
    for name, svc in services.items():
        env = svc.get("environment") or {}
        for port in svc.get("ports") or []:
            if port.get("published") and port.get("host_ip") != "127.0.0.1":
                errors.append(
                    f"service {name}: port {port.get('published')} is published on "
                    f"{port.get('host_ip') or 'all interfaces'}, not 127.0.0.1"
                )
        if any(k.startswith("GENENV_") for k in env) and not name.startswith(("vllm-", "model")):
            if str(env.get("GENENV_AUTH__REQUIRED", "")).lower() != "true":
                errors.append(f"service {name}: GENENV_AUTH__REQUIRED is not true")
            for key in ("GENENV_AUTH__TOKENS", "GENENV_AUTH__CLIENT_TOKEN", "GENENV_INFERENCE__API_KEY"):
                if not env.get(key):
                    errors.append(f"service {name}: {key} is not set")
            if "@" not in str(env.get("GENENV_REDIS__URL", "@")):
                errors.append(f"service {name}: GENENV_REDIS__URL carries no password")
        if name.startswith("vllm-") and not env.get("VLLM_API_KEY"):
            errors.append(f"service {name}: vLLM without VLLM_API_KEY (anyone could load LoRA adapters)")
    redis = services.get("redis")
    if redis is not None and "--requirepass" not in (redis.get("command") or []):
        errors.append("service redis: no --requirepass")
    return errors
