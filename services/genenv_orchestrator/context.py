"""Everything a phase needs, built once per orchestrator process."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from genenv.settings import GenEnvSettings
from genenv_orchestrator.ports import CurriculumPort, Dispatcher, PublisherPort, SimulatorPort, VerifierPort


@dataclass
class OrchestratorContext:
    """Ports to the other processes plus the database; phases receive this and nothing global."""

    settings: GenEnvSettings
    session_factory: sessionmaker[Session]
    simulator: SimulatorPort
    verifier: VerifierPort
    curriculum: CurriculumPort
    dispatcher: Dispatcher
    publisher: PublisherPort
    #: seeds per simulator request / items per verifier request
    generate_chunk: int = 4
    verify_chunk: int = 512
    benchmarks_dir: Path | None = field(default=None)

    @property
    def poll_interval_s(self) -> float:
        """Seconds between polls while a worker job runs (distributed mode)."""
        return self.settings.orchestrator.poll_interval_s

    @property
    def stall_timeout_s(self) -> float:
        """A dispatched job with no progress for this long is dispatched again (its worker presumably died)."""
        return self.settings.orchestrator.stall_timeout_s
