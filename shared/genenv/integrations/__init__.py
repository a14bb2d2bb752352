"""Adapters that plug an outside trainer into an external_agent run (each imports its framework lazily)."""
