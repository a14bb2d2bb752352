"""Process-wide resources of the simulator service: the simulator model backend, the database, seed caches."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from genenv import catalogue
from genenv.contracts.adapters import Role
from genenv.contracts.errors import NotFoundError
from genenv.contracts.tasks import Seed
from genenv.db.engine import ServiceDatabase
from genenv.domains.base import Domain
from genenv.inference.base import InferenceBackend
from genenv.inference.factory import build_backend
from genenv.settings import GenEnvSettings


@dataclass
class SimulatorResources:
    """What the routes need; ``owns_*`` marks what this service created and must release."""

    settings: GenEnvSettings
    backend: InferenceBackend
    db: ServiceDatabase
    owns_backend: bool
    _train_seeds: dict[str, dict[str, Seed]] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        settings: GenEnvSettings,
        *,
        backend: InferenceBackend | None = None,
        sessions: sessionmaker[Session] | None = None,
    ) -> SimulatorResources:
        """Use the given backend / session factory (embedded mode, tests) or build them from settings."""
        return cls(
            settings=settings,
            backend=backend if backend is not None else build_backend(settings, Role.SIMULATOR),
            db=ServiceDatabase.open(settings.database, sessions),
            owns_backend=backend is None,
        )

    def domain(self, name: str) -> Domain:
        """The domain (built-in, plug-in, or data-defined from the database), or a 404 naming the known ones.

        404, as on the control plane: the name addresses something that does not exist, like an unknown seed id
        (404 unknown_seed); 400 is for a request that names existing things in an unacceptable way (api.md#errors).
        """
        with self.db.sessions() as session:  # a session connects on its first query: built-ins never touch it
            try:
                return catalogue.resolve(session, name)  # NotFoundError (param domain, code unknown_domain)
            except SQLAlchemyError:
                # A standalone simulator may run without a migrated database: then only static domains exist.
                raise NotFoundError(
                    f"unknown domain {name!r}; choose from {catalogue.names()} (data-defined domains need "
                    "GENENV_DATABASE__URL pointing at the database they were registered in)",
                    param="domain", code="unknown_domain") from None

    def train_seed(self, domain: Domain, seed_id: str) -> Seed:
        """A seed of the domain's TRAIN split by id (evaluation items are never seeds: 404)."""
        if domain.name not in self._train_seeds:
            seeds = domain.load_seeds(self.settings.paths.benchmarks, "train")
            self._train_seeds[domain.name] = {s.id: s for s in seeds}
        try:
            return self._train_seeds[domain.name][seed_id]
        except KeyError:
            raise NotFoundError(
                f"no seed {seed_id!r} in the train split of {domain.name!r}", param="seed_ids", code="unknown_seed"
            ) from None

    async def close(self) -> None:
        """Release what this service created."""
        if self.owns_backend:
            await self.backend.aclose()
        self.db.close()
