"""Pydantic wire models for everything that crosses a process boundary."""
