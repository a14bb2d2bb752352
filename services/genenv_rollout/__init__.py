"""rollout service."""
