"""Orchestrator: advances each run through its persisted epoch phases (Celery queue ``control``)."""
