#!/usr/bin/env bash
# Set up (idempotent) and run a complete small co-evolution run on the embedded default (SQLite, in-process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# shellcheck disable=SC1091
source .venv/bin/activate
genenv quickstart "$@"
