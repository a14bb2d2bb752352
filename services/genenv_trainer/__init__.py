"""Trainer worker: GRPO for the agent and RWR for the simulator, each writing a new LoRA adapter version."""
