#!/usr/bin/env bash
# Build every GenEnv image (docs/deployment.md, "Building the images").
#   scripts/images.sh                  # local Debian bases (no registry needed) + the CPU images
#   scripts/images.sh --bases public   # the public base images of the Dockerfiles' defaults (needs a registry)
#   scripts/images.sh --gpu            # also the GPU images (vLLM upstream image, CUDA trainer; public bases only)
#   scripts/images.sh daemon           # only make sure a Docker engine answers (starts dockerd if none runs)
#
# Local bases: `debootstrap` a minimal bookworm with Debian's Python 3.11 into .images/, `docker import` it as
# genenv-local/python:3.11-bookworm, then build Debian stand-ins for the postgres and redis images on it. The
# Dockerfiles take their bases as build arguments whose defaults stay the public images, so the same files build
# on a user's machine. Docker's layer cache makes a rebuild of an unchanged tree take seconds; the bases are built
# once per machine (--rebuild-bases to redo them).
#
# Environment: DOCKER (client, default docker), GENENV_IMAGES_DIR (scratch space, default .images, git-ignored),
# DEBIAN_MIRROR (default http://deb.debian.org/debian), DOCKER_STORAGE_DRIVER (dockerd started here; default
# overlay2 where an overlay mount works, else vfs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
WORK="${GENENV_IMAGES_DIR:-$ROOT/.images}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PY_BASE=genenv-local/python:3.11-bookworm
PG_IMAGE=genenv-local/postgres:15-bookworm
REDIS_IMAGE=genenv-local/redis:7-bookworm
VERSION=0.1.0

bases=local
gpu=0
rebuild_bases=0
cmd=build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --bases) bases="$2"; shift 2 ;;
    --gpu) gpu=1; shift ;;
    --rebuild-bases) rebuild_bases=1; shift ;;
    daemon) cmd=daemon; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$bases" == local || "$bases" == public ]] || { echo "--bases must be local or public" >&2; exit 2; }

log() { printf '[images %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# A client that can build with BuildKit (the Dockerfiles use RUN --mount and per-Dockerfile .dockerignore files):
# `docker buildx` where installed, else a pre-23 client with DOCKER_BUILDKIT=1 (Debian's docker.io 20.10), which
# drives the engine's built-in BuildKit without the buildx plugin.
pick_client() {
  local c
  for c in "${DOCKER:-docker}" /usr/bin/docker; do
    command -v "$c" >/dev/null || continue
    if "$c" buildx version >/dev/null 2>&1; then DOCKER_CLI="$c"; BUILD=("$c" buildx build --load); return; fi
    local major
    major="$("$c" version --format '{{.Client.Version}}' 2>/dev/null | cut -d. -f1)"
    if [[ -n "$major" && "$major" -lt 23 ]]; then
      DOCKER_CLI="$c"; BUILD=(env DOCKER_BUILDKIT=1 "$c" build); return
    fi
  done
  echo "no Docker client with BuildKit found: install docker-buildx, or Debian's docker.io (apt-get install docker.io)" >&2
  exit 1
}

# overlay2 when the kernel lets us mount an overlay here, else vfs. vfs stores every layer and every container as
# a full copy: the CPU images then take ~45 GB and each vllm-cpu container another 4 GB, which can fill the disk.
storage_driver() {
  local d
  d="$(mktemp -d "$WORK/overlay-probe.XXXXXX")"
  mkdir -p "$d/l" "$d/u" "$d/w" "$d/m"
  if mount -t overlay overlay -o "lowerdir=$d/l,upperdir=$d/u,workdir=$d/w" "$d/m" 2>/dev/null; then
    umount "$d/m"; rm -rf "$d"; echo overlay2
  else
    rm -rf "$d"; echo vfs
  fi
}

# Start dockerd when nothing answers (no iptables, no bridge: containers use host networking). Its pid and log go
# to $WORK so the caller can stop what this script started.
ensure_daemon() {
  if "${DOCKER:-docker}" info >/dev/null 2>&1 || /usr/bin/docker info >/dev/null 2>&1; then return; fi
  command -v dockerd >/dev/null || { echo "no Docker engine: apt-get install -y docker.io" >&2; exit 1; }
  mkdir -p "$WORK"
  local driver
  driver="${DOCKER_STORAGE_DRIVER:-$(storage_driver)}"
  log "starting dockerd ($driver, no bridge; log $WORK/dockerd.log)"
  nohup dockerd --storage-driver="$driver" --iptables=false --bridge=none >"$WORK/dockerd.log" 2>&1 &
  echo $! >"$WORK/dockerd.pid"
  for _ in $(seq 60); do
    if "${DOCKER:-/usr/bin/docker}" info >/dev/null 2>&1 || /usr/bin/docker info >/dev/null 2>&1; then return; fi
    sleep 1
  done
  echo "dockerd did not answer within 60 s; see $WORK/dockerd.log" >&2
  exit 1
}

have_image() { "$DOCKER_CLI" image inspect "$1" >/dev/null 2>&1; }

build_python_base() {
  if [[ "$rebuild_bases" == 0 ]] && have_image "$PY_BASE"; then log "base $PY_BASE exists"; return; fi
  command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install -y debootstrap" >&2; exit 1; }
  local rootfs="$WORK/rootfs-python" start=$SECONDS
  rm -rf "$rootfs"
  log "debootstrap bookworm + python3 into $rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
    bookworm "$rootfs" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
  local change=(--change "ENV LANG=C.UTF-8" --change 'CMD ["python3"]')
  # Where pip is told to trust an extra CA bundle (a TLS-inspecting proxy in front of PyPI), builds need it too.
  local cert="${PIP_CERT:-$(pip config get global.cert 2>/dev/null || true)}"
  if [[ -n "$cert" && -f "$cert" ]]; then
    cp "$cert" "$rootfs/etc/ssl/certs/genenv-build-ca.crt"
    change+=(--change "ENV PIP_CERT=/etc/ssl/certs/genenv-build-ca.crt")
  fi
  tar -C "$rootfs" -c . | "$DOCKER_CLI" import "${change[@]}" - "$PY_BASE" >/dev/null
  rm -rf "$rootfs"
  log "base $PY_BASE in $((SECONDS - start)) s"
}

# The CPU torch wheel that pip resolves on this machine (a local wheel store, or the PyTorch CPU index when
# PIP_EXTRA_INDEX_URL names it) goes into the build context: PyPI's own torch is the multi-GB CUDA build.
fetch_torch_wheel() {
  # shellcheck disable=SC1091
  source deploy/vllm/versions.env
  if compgen -G "deploy/docker/wheels/torch-*.whl" >/dev/null; then return; fi
  local py
  py="$(command -v python3)"
  [[ -x "$ROOT/.venv/bin/python" ]] && py="$ROOT/.venv/bin/python"
  log "pip download $TORCH_CPU -> deploy/docker/wheels"
  "$py" -m pip download --quiet --no-deps --only-binary :all: -d deploy/docker/wheels "$TORCH_CPU"
  if ! compgen -G "deploy/docker/wheels/torch-*+cpu*.whl" >/dev/null; then
    echo "the torch wheel pip found is not a CPU build; set PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu" >&2
    exit 1
  fi
}

# build NAME DOCKERFILE [build args...]: one image, timed.
build() {
  local tag="$1" file="$2" start=$SECONDS
  shift 2
  log "build $tag ($file)"
  "${BUILD[@]}" --network host -f "$file" -t "$tag" "$@" . >"$WORK/build-${tag//[\/:]/_}.log" 2>&1 \
    || { tail -40 "$WORK/build-${tag//[\/:]/_}.log" >&2; echo "build of $tag failed" >&2; exit 1; }
  log "built $tag in $((SECONDS - start)) s"
}

ensure_daemon
pick_client
[[ "$cmd" == daemon ]] && exit 0
mkdir -p "$WORK"
total=$SECONDS
args=()
if [[ "$bases" == local ]]; then
  build_python_base
  fetch_torch_wheel
  # Builds reach PyPI only: the torch pin resolves to the local CPU wheel in deploy/docker/wheels.
  args=(--build-arg "PYTHON_IMAGE=$PY_BASE" --build-arg "TORCH_INDEX_URL=https://pypi.org/simple")
  build "$PG_IMAGE" deploy/docker/local/Dockerfile.postgres --build-arg "BASE_IMAGE=$PY_BASE"
  build "$REDIS_IMAGE" deploy/docker/local/Dockerfile.redis --build-arg "BASE_IMAGE=$PY_BASE"
fi
build "genenv/app:$VERSION" deploy/docker/Dockerfile.app "${args[@]}"
if [[ "$bases" == local ]]; then
  build "genenv/trainer:$VERSION-cpu" deploy/docker/Dockerfile.trainer "${args[@]}"
else
  build "genenv/trainer:$VERSION-cpu" deploy/docker/Dockerfile.trainer \
    --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
fi
build "genenv/vllm-cpu:$VERSION" deploy/docker/Dockerfile.vllm-cpu "${args[@]}"
if [[ "$gpu" == 1 ]]; then
  [[ "$bases" == public ]] || { echo "--gpu needs --bases public (vLLM's CUDA image)" >&2; exit 2; }
  build "genenv/trainer:$VERSION" deploy/docker/Dockerfile.trainer
  build "genenv/vllm:$VERSION" deploy/docker/Dockerfile.vllm --build-arg "$(grep ^VLLM_GPU_IMAGE= deploy/vllm/versions.env)"
fi
log "all images in $((SECONDS - total)) s"
"$DOCKER_CLI" image ls --format '{{.Repository}}:{{.Tag}}\t{{.Size}}' | grep -E '^genenv' >&2 || true
