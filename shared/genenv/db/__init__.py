"""SQLAlchemy models, engine/session helpers and repositories (flush, never commit)."""
