"""Fixtures for the documentation checks: the four HTTP apps built in-process on a migrated SQLite database."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from docs_helpers import TOKEN, Apps

from genenv.db.migrate import upgrade
from genenv.settings import GenEnvSettings


@pytest.fixture(scope="session")
def docs_settings(tmp_path_factory: pytest.TempPathFactory) -> GenEnvSettings:
    """Settings on a migrated SQLite file, auth on, the simulator wired to a vLLM URL that is never called."""
    home = tmp_path_factory.mktemp("docs")
    url = f"sqlite:///{home / 'genenv.db'}"
    upgrade(url)
    return GenEnvSettings(
        database={"url": url},
        auth={"tokens": [TOKEN]},
        paths={"home": home, "adapter_store": home / "adapters"},
        # The simulator builds its model client from settings; an address nothing listens on keeps it offline.
        inference={"backend": "vllm"},
        services={"vllm_agent": "http://127.0.0.1:9", "vllm_simulator": "http://127.0.0.1:9"},
    )


@pytest.fixture(scope="session")
def apps(docs_settings: GenEnvSettings) -> Iterator[Apps]:
    """control_plane, simulator, verifier, curriculum built with their create_app."""
    from genenv_control_plane.app import create_app as control_plane
    from genenv_curriculum.app import create_app as curriculum
    from genenv_simulator.app import create_app as simulator
    from genenv_verifier.app import create_app as verifier

    built = {
        "control_plane": control_plane(docs_settings),
        "simulator": simulator(docs_settings),
        "verifier": verifier(docs_settings),
        "curriculum": curriculum(docs_settings),
    }
    try:
        yield Apps(docs_settings, built)
    finally:
        built["control_plane"].state.control_plane.close()
        built["curriculum"].state.curriculum.close()
        asyncio.run(built["simulator"].state.simulator.close())
        asyncio.run(built["verifier"].state.verifier.close())


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return Path(__file__).resolve().parents[2]
