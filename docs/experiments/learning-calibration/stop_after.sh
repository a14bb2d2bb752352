#!/usr/bin/env bash
# Stop the calibration at a member boundary: once N of its member runs have completed, SIGINT the running
# `genenv experiment` CLI (it stops the drive; run.sh then exits; the model server dies with its parent). The next
# member has then just started at epoch 0 (no adapter yet), so the database alone carries the work and
#   python docs/experiments/save_db.py .genenv/learning-calibration docs/experiments/learning-calibration/genenv-partial.db.gz --slim
# keeps it for the next session. A member cut off later in its run would need its adapters, which stay in HOME.
#   bash docs/experiments/learning-calibration/stop_after.sh N [HOME]      # e.g. in the background: … & disown
set -euo pipefail
n="$1"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
db="$(realpath -m "${2:-$root/.genenv/learning-calibration}")/genenv.db"
count() { python3 -c 'import sqlite3,sys; print(sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True).execute("SELECT count(*) FROM run WHERE status = '"'"'completed'"'"'").fetchone()[0])' "$db"; }
until [ "$(count)" -ge "$n" ]; do sleep 15; done
cli="$(pgrep -f "genenv experiment (run|resume)" | head -1)"
echo "$(date -u +%T): $(count) members completed; SIGINT to $cli"
kill -INT "$cli"
sleep 60
if kill -0 "$cli" 2>/dev/null; then echo "$(date -u +%T): still running; SIGTERM"; kill -TERM "$cli"; fi
