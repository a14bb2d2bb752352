"""The trainer's torch code: LoRA, data, GRPO (agent) and RWR (simulator)."""
