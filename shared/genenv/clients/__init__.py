"""Typed httpx clients for the GenEnv services (HTTP or in-process ASGI transport)."""
