#!/usr/bin/env bash
# docs/external-agent.md, section 2b, as run: a `genenv up` stack, an external_agent run (3 epochs of
# examples/external-agent-arithmetic.yaml, short epoch deadline), and examples/trl_grpo_external_agent.py training
# SmolLM2-135M-Instruct with TRL's GRPOTrainer on its tasks for STEPS steps; then what the run stored. A refused
# report (exit 1 of the example) does not stop it: the run's record is what shows why.
#   bash docs/experiments/external-agent/trl.sh [OUT_DIR]     # OUT/trl.out, OUT/trl-run.txt; logs in OUT/logs
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
out="$(realpath -m "${1:-$root/docs/experiments/external-agent}")"
# shellcheck disable=SC1091
source "$root/.venv/bin/activate"
# shellcheck source=docs/experiments/external-agent/stack.sh
source "$root/docs/experiments/external-agent/stack.sh"
cd "$root"
STEPS="${STEPS:-8}" PROMPTS="${PROMPTS:-3}"
stack_up "$out/logs/trl-stack"
cfg="$out/logs/trl-run.yaml"
sed -e "s/^name: .*/name: trl-agent/" -e "s/^epochs: .*/epochs: 3/" \
  -e "s/^  epoch_deadline_s: .*/  epoch_deadline_s: 120/" -e "s/^  min_attempted_share: .*/  min_attempted_share: 0.5/" \
  examples/external-agent-arithmetic.yaml > "$cfg"
run=$(genenv runs create "$cfg" --json | python -c "import json,sys; print(json.load(sys.stdin)['id'])")
genenv runs start "$run" >/dev/null
model="$HOME/.genenv/models/smollm2-135m-instruct"   # prepared by scripts/setup.sh (genenv models prepare)
{ echo "\$ python examples/trl_grpo_external_agent.py --run-id RUN_ID --model $model --steps $STEPS --prompts $PROMPTS"
  HF_HUB_OFFLINE=1 python -W ignore examples/trl_grpo_external_agent.py --run-id "$run" --model "$model" \
    --steps "$STEPS" --prompts "$PROMPTS" --output-dir "$out/logs/trl-out" 2>&1 | tr '\r' '\n' | grep -vE "(it|s/it)\]$|^ *$" || true; } | tee "$out/trl.out"
sleep 5
# What the run stored of the trainer's attempts: each epoch's summary (GET /v1/runs/ID/epochs).
curl -sS -H "Authorization: Bearer $GENENV_TOKEN" "$GENENV_URL/v1/runs/$run/epochs" | python -c '
import json, sys
for e in json.load(sys.stdin)["items"]:
    s = e.get("summary") or {}
    print("epoch %s: phase %s · tasks valid %s · attempts %s · unattempted %s · p̂ %s · in-band %s" % (
        e["index"], e["phase"], s.get("tasks_valid"), s.get("rollouts"), s.get("tasks_unattempted"),
        s.get("p_hat"), s.get("in_band_share")))' > "$out/trl-run.txt"
curl -sS -H "Authorization: Bearer $GENENV_TOKEN" "$GENENV_URL/v1/runs/$run/adapters" | python -c '
import json, sys
print("adapters:", ", ".join("%s v%s" % (a["role"], a["version"]) for a in json.load(sys.stdin)["items"]))' \
  >> "$out/trl-run.txt"
genenv runs cancel "$run" >/dev/null 2>&1 || true
