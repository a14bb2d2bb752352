"""Repositories: functions that take a session, flush, never commit."""
