"""Alembic migrations: one history for Postgres and SQLite (batch mode). Run via ``genenv db upgrade``."""
