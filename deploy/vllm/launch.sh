#!/bin/sh
# Start the upstream vLLM OpenAI-compatible server with GenEnv's launch configuration (GPU image).
# Extra arguments are appended, so a deployment can add or override flags (argparse keeps the last value),
# e.g. `--max-model-len 16384 --gpu-memory-utilization 0.90`.
set -eu

model="${GENENV_INFERENCE__BASE_MODEL:?set GENENV_INFERENCE__BASE_MODEL to a model folder, a name under the model cache, or a hub id}"
cache="${GENENV_PATHS__MODEL_CACHE:-/var/lib/genenv/models}"
# Same resolution as genenv.models.prepare.resolve_model: a bare name means a folder in the model cache.
case "$model" in
  /*) ;;
  *) if [ -f "$cache/$model/config.json" ]; then model="$cache/$model"; fi ;;
esac

# GRPO's old log-probs are those of the distribution sampled (temperature applied); one grammar engine for every
# request (an engine keeps the backend its first guided request picked), compact JSON: as
# genenv.inference.launcher.build_command.
# Trainers publish new LoRA versions while the server runs (POST /v1/load_lora_adapter).
export VLLM_ALLOW_RUNTIME_LORA_UPDATING=True

exec vllm serve "$model" \
  --host 0.0.0.0 \
  --port 8000 \
  --served-model-name "${GENENV_INFERENCE__SERVED_MODEL_NAME:-base}" \
  --enable-lora \
  --max-lora-rank 16 \
  --max-loras 8 \
  --logprobs-mode processed_logprobs \
  --structured-outputs-config.backend xgrammar \
  --structured-outputs-config.disable_any_whitespace true \
  "$@"
