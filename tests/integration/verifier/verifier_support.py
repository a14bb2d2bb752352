"""Settings for the verifier service under test (imported by the tests and their conftest)."""

from __future__ import annotations

from pathlib import Path

from genenv.settings import GenEnvSettings


def verifier_settings(benchmarks_dir: Path, **verifier: object) -> GenEnvSettings:
    """Settings for the service under test (SQLite unless a session factory is passed to create_app)."""
    return GenEnvSettings(
        paths={"benchmarks": benchmarks_dir},
        verifier=verifier,
        inference={"backend": "vllm"},
        services={"vllm_agent": "http://127.0.0.1:1"},
    )
