#!/usr/bin/env bash
# Continue the two-sided experiment (design (a), docs/experiments/preregistration-two-sided.md) from its stored
# database, on the code it started with (a99dc87: "same seeds, same code", as the pre-registration says).
#   bash docs/experiments/two-sided/resume.sh [HOME]      # default HOME: .genenv/two-sided
# Stop it with Ctrl-C (or SIGTERM) when a member has just completed (the next one at epoch 0, generate): then its
# database alone carries it, and `python docs/experiments/two-sided/save.py HOME` writes genenv-partial.db.gz again.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
home="$(realpath -m "${1:-$root/.genenv/two-sided}")"
code="$root/.genenv/two-sided-code"
[ -d "$code" ] || git -C "$root" worktree add --detach "$code" a99dc87
mkdir -p "$home"
[ -f "$home/genenv.db" ] || gunzip -c "$root/docs/experiments/two-sided/genenv-partial.db.gz" > "$home/genenv.db"
# shellcheck disable=SC1091
source "$root/.venv/bin/activate"
export PYTHONPATH="$code/shared:$code/services"
cd "$code"
date -u +"resume %FT%TZ"; cut -d' ' -f1-3 /proc/loadavg
genenv experiment resume f06dc2836a1b4c0c858d5ce1ad2f1b25 --home "$home"
